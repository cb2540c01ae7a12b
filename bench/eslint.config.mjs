// ESLint for the bench (plain CommonJS scripts run by Node; the root config ignores bench/):
// `npm run lint:bench` runs it and Prettier.
import js from '@eslint/js';
import globals from 'globals';

export default [
  {
    ignores: [
      '**/node_modules/**',
      '**/nestarc/source/**',
      '**/nestarc/dist/**',
      '**/peer/ours-dist/**',
      '**/peer/lib-*/**',
      '**/.als/**',
    ],
  },
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: { sourceType: 'commonjs', ecmaVersion: 2024, globals: { ...globals.node } },
    rules: { 'no-unused-vars': ['error', { argsIgnorePattern: '^_' }] },
  },
];
