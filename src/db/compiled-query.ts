/**
 * A query written with knex's builder but built and compiled to SQL once, for the statements every
 * request runs (authentication): knex's builder and compiler cost 5-8 µs of CPU a query each time
 * and leave their garbage, while its SQL and the places of its values never change. Each call runs
 * that SQL through `knex.raw` with the call's values, as a named prepared statement: PostgreSQL
 * parses it once per connection, then only binds and executes it (issue 37). A named statement lives
 * on its server connection: a PgBouncer in front must be in session mode, as docs/scaling.md has it.
 */
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * `build` gets one marker per value (to pass where the query takes the value); the built query's
 * other bindings (the `limit 1` of `first()`) are kept as compiled. Resolves with the rows.
 */
export function compiledQuery<Values extends Knex.Value[], Row>(
  db: Knex,
  build: (...markers: string[]) => Knex.QueryBuilder,
  arity: Values['length'],
): (...values: Values) => Promise<Row[]> {
  // NUL cannot be in a value PostgreSQL stores, so a marker is never mistaken for a constant.
  const markers = Array.from({ length: arity }, (_, i) => `\0compiled-query-value-${i}`);
  const { sql, bindings } = build(...markers).toSQL();
  const places = bindings.map((b) => markers.indexOf(b as string));
  for (let i = 0; i < arity; i++) {
    if (!places.includes(i)) throw new Error(`compiledQuery: value ${i} is not bound by the query ${sql}`);
  }
  // The same SQL has the same name, in every instance of the store and on every connection.
  const name = `compiled_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`;
  const options = { name };
  return (...values) => {
    const args: Knex.Value[] = new Array(places.length);
    for (let i = 0; i < places.length; i++) args[i] = places[i] === -1 ? bindings[i] : values[places[i]];
    return db
      .raw(sql, args)
      .options(options)
      .then(rowsOf<Row>);
  };
}

const rowsOf = <Row>(result: { rows: Row[] }): Row[] => result.rows;
