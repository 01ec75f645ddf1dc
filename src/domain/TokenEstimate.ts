/** About four characters a token: what the engine counts when a provider does not say. */
export const estimateTextTokens = (text: string) => Math.ceil(text.length / 4)

/** Tokens of a call whose answer reported no usage: its messages in, its text out. */
export const estimatedUsage = (messages: ReadonlyArray<{ readonly content: string }>, answer: string) => {
  const promptTokens = messages.reduce((sum, message) => sum + estimateTextTokens(message.content), 0)
  const completionTokens = estimateTextTokens(answer)
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens }
}
