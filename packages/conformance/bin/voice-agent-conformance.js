#!/usr/bin/env node
// Runs the TypeScript sources through tsx, so the command works from a clone without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
process.exitCode = await main(process.argv.slice(2));
