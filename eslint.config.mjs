// Lint and format (dprint through @effect/eslint-plugin), configured as the Effect monorepo does.
import * as effectEslint from "@effect/eslint-plugin"
import eslint from "@eslint/js"
import globals from "globals"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/dist", "**/node_modules", "**/reports", "**/.stryker-tmp*", "**/.scratch", "bench/results"] },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  effectEslint.configs.dprint,
  { files: ["**/*.mjs"], languageOptions: { globals: globals.node } },
  {
    rules: {
      // `Data.TaggedEnum` writes a case without fields as `{}`.
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@effect/dprint": [
        "error",
        {
          config: {
            indentWidth: 2,
            lineWidth: 120,
            semiColons: "asi",
            quoteStyle: "alwaysDouble",
            trailingCommas: "never",
            operatorPosition: "maintain",
            "arrowFunction.useParentheses": "force"
          }
        }
      ]
    }
  }
)
