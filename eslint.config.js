// ESLint (flat config): typescript-eslint's recommended rules over every TypeScript source, formatting
// left to Prettier (eslint-config-prettier), and the import boundary of the domains: only a domain's
// adapters (routes.ts for HTTP, the WebSocket servers, the wiring in index.ts) may import src/http/.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import globals from 'globals';

const DOMAIN_ADAPTERS = ['src/*/routes.ts', 'src/realtime/ws-server.ts', 'src/realtime/index.ts', 'src/telephony/media-server.ts'];

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/dist/**', 'generated/**', 'packages/client/src/realtime-messages.ts', '.data/**', '.contract-coverage/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['**/*.ts', '**/*.tsx'],
    rules: {
      // The code reads untyped JSON (bundled documents, carrier frames) through `any` on purpose in a few places.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // A variable assigned once, after closures that read it were made, stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: globals.node },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/http/**', 'src/app.ts', 'src/service.ts', 'src/main.ts', ...DOMAIN_ADAPTERS],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/http/*', '../http/*', '../../http/*'],
              message:
                'Domains do not depend on the HTTP layer: errors come from src/errors/, the contract from src/contract/. Only routes.ts and the socket adapters import src/http/.',
            },
          ],
        },
      ],
    },
  },
);
