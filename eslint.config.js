// ESLint (flat config): typescript-eslint's recommended rules over every TypeScript source, formatting
// left to Prettier (eslint-config-prettier), and the import boundaries of src/: each room imports only
// rooms of its layer or below (lint/rooms.js), nothing but the assembly imports the simulators, carriers
// import no domain, and only a domain's adapters (routes.ts for HTTP, the WebSocket servers, the wiring in
// index.ts) may import src/http/.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import { ROOMS, PURE, forbiddenFor } from './lint/rooms.js';

const DOMAIN_ADAPTERS = ['src/*/routes.ts', 'src/realtime/ws-server.ts', 'src/realtime/index.ts', 'src/calls/live/media-server.ts'];

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** An import of `room` from anywhere below src/ (relative specifiers climb to src/ first). */
const roomImport = (room) => `^(\\.\\./)+${escape(room)}/`;

const HTTP_PATTERN = {
  regex: roomImport('http'),
  message:
    'Domains do not depend on the HTTP layer: errors come from src/errors/, handler types and the contract from src/contract/. Only routes.ts and the socket adapters import src/http/.',
};

/** One room's import rules, with or without the HTTP boundary (adapters may import src/http/). */
function roomRules(room, withHttp) {
  const patterns = forbiddenFor(room).map((other) => ({
    regex: roomImport(other),
    message: `src/${room}/ may not import src/${other}/: ${PURE[room]?.rooms.includes(other) ? `${room} is an adapter and imports no domain of ours` : other === 'sandbox' ? 'only src/service.ts starts the simulators' : `${other} sits above ${room} (lint/rooms.js)`}.`,
  }));
  if (withHttp && room !== 'http') patterns.push(HTTP_PATTERN);
  const paths = (PURE[room]?.packages ?? []).map((name) => ({ name, message: `src/${room}/ is an adapter: no database or web framework.` }));
  return { 'no-restricted-imports': ['error', { patterns, paths }] };
}

const roomConfigs = ROOMS.flatMap((room) => [
  { files: [`src/${room}/**/*.ts`], ignores: DOMAIN_ADAPTERS, rules: roomRules(room, true) },
  {
    files: DOMAIN_ADAPTERS.filter((a) => a.startsWith(`src/${room}/`) || a.startsWith('src/*/')).map((a) => a.replace('src/*/', `src/${room}/`)),
    rules: roomRules(room, false),
  },
]);

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
  ...roomConfigs,
);
