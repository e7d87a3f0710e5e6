import type Koa from 'koa';
import type { Knex } from 'knex';

export function bareKeysApp(knex: Knex): Koa;
