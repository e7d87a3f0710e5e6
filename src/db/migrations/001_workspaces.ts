import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('workspaces', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    t.text('plan').notNullable();
    t.text('subscription_status').notNullable();
    t.bigInteger('credit_balance_cents').notNullable();
    t.integer('concurrent_session_limit').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(`alter table workspaces add constraint workspaces_subscription_status_check
    check (subscription_status in ('active', 'past_due', 'unpaid'))`);

  await knex.schema.createTable('users', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('email').notNullable();
    t.text('password_hash').notNullable();
    t.text('role').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id']);
  });
  await knex.raw('create unique index users_email_unique on users (lower(email))');
  await knex.raw(`alter table users add constraint users_role_check
    check (role in ('owner', 'admin', 'developer', 'viewer'))`);

  await knex.schema.createTable('dashboard_sessions', (t) => {
    t.text('id').primary();
    t.text('token_hash').notNullable().unique();
    t.text('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('key_hash').notNullable().unique();
    t.text('key_prefix').notNullable();
    t.text('created_by').references('users.id').onDelete('SET NULL');
    t.timestamp('revoked_at', { useTz: true });
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['api_keys', 'dashboard_sessions', 'users', 'workspaces']) {
    await knex.schema.dropTableIfExists(table);
  }
}
