import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseRecipientsCsv, type CsvParseResult } from '../../src/batches/csv.js';

const csv = (text: string, limits?: Parameters<typeof parseRecipientsCsv>[1]) => parseRecipientsCsv(Buffer.from(text, 'utf8'), limits);

function accepted(result: CsvParseResult) {
  assert.ok(result.ok, `expected the file to be accepted: ${JSON.stringify(result.problems)}`);
  return result;
}

function refused(result: CsvParseResult) {
  assert.ok(!result.ok, 'expected the file to be refused');
  return result.problems;
}

describe('batch recipients CSV', () => {
  it('reads quoted fields with commas, escaped quotes and newlines, and keeps row numbers as file lines', async () => {
    const r = accepted(
      await csv(
        [
          'to_number,name,note',
          '+15550001,"Doe, Jane","She said ""hi"""',
          '+15550002,Bob,"line one',
          'line two',
          'line three"',
          '',
          '+15550003,Carol,plain',
        ].join('\n'),
      ),
    );
    assert.deepEqual(r.problems, []);
    assert.deepEqual(r.recipients, [
      { index: 0, row: 2, to_number: '+15550001', variables: { name: 'Doe, Jane', note: 'She said "hi"' } },
      { index: 1, row: 3, to_number: '+15550002', variables: { name: 'Bob', note: 'line one\nline two\nline three' } },
      { index: 2, row: 7, to_number: '+15550003', variables: { name: 'Carol', note: 'plain' } },
    ]);
  });

  it('ignores a BOM and reads CRLF line ends, also inside quoted fields', async () => {
    const r = accepted(await csv('\uFEFFto_number,note\r\n+1555,"a\r\nb"\r\n\r\n+1666,c\r\n'));
    assert.deepEqual(r.recipients, [
      { index: 0, row: 2, to_number: '+1555', variables: { note: 'a\r\nb' } },
      { index: 1, row: 5, to_number: '+1666', variables: { note: 'c' } },
    ]);
  });

  it('matches to_number and first_message case-insensitively and trims headers and values', async () => {
    const r = accepted(await csv(' To_Number , First_MESSAGE ,Name\n  +1555 ,  Hello there  , Ann \n'));
    assert.deepEqual(r.recipients, [{ index: 0, row: 2, to_number: '+1555', first_message: 'Hello there', variables: { Name: 'Ann' } }]);
  });

  it('leaves out empty variable cells and an empty first_message', async () => {
    const r = accepted(await csv('to_number,first_message,name,city\n+1555,,,Oslo\n+1666,"  ",Bo,\n'));
    assert.deepEqual(r.recipients, [
      { index: 0, row: 2, to_number: '+1555', variables: { city: 'Oslo' } },
      { index: 1, row: 3, to_number: '+1666', variables: { name: 'Bo' } },
    ]);
  });

  it('skips empty and whitespace-only rows', async () => {
    const r = accepted(await csv('to_number,name\n\n   \n, \n+1555,A\n'));
    assert.deepEqual(r.recipients, [{ index: 0, row: 5, to_number: '+1555', variables: { name: 'A' } }]);
    assert.deepEqual(r.problems, []);
  });

  it('reports every header problem at once', async () => {
    const problems = refused(await csv('1st,,name,name,Name,first_message,FIRST_MESSAGE,bad-name\n+1555,a,b,c,d,e,f,g\n'));
    assert.deepEqual(
      problems.map((p) => [p.type, p.column]),
      [
        ['csv_invalid_column', '1st'],
        ['csv_invalid_column', ''],
        ['csv_duplicate_column', 'name'],
        ['csv_duplicate_column', 'FIRST_MESSAGE'],
        ['csv_invalid_column', 'bad-name'],
        ['csv_missing_column', 'to_number'],
      ],
    );
  });

  it('refuses a duplicate to_number column and too many variable columns', async () => {
    const problems = refused(await csv('to_number,a,b,c,TO_NUMBER\n', { maxVariables: 2 }));
    assert.deepEqual(
      problems.map((p) => [p.type, p.column]),
      [
        ['csv_duplicate_column', 'TO_NUMBER'],
        ['csv_too_many_columns', null],
      ],
    );
  });

  it("reads conversation columns into the row's override: empty cells left out, null, integers, reminders split on |", async () => {
    const r = accepted(
      await csv(
        [
          'to_number,conversation.max_duration_seconds,conversation.interruptions,conversation.turn_detection.silence_ms,conversation.idle.idle_ms,conversation.idle.reminders,name',
          '+1555,120,never,800,5000,Are you there? | Still here.|,A',
          '+1666,,,,,,B',
          '+1777,null,,,null,,C',
          '+1888,ten,,,,,D',
        ].join('\n'),
      ),
    );
    assert.deepEqual(
      r.recipients.map((x) => x.conversation),
      [
        {
          max_duration_seconds: 120,
          interruptions: 'never',
          turn_detection: { silence_ms: 800 },
          idle: { idle_ms: 5000, reminders: ['Are you there?', 'Still here.'] },
        },
        undefined,
        { max_duration_seconds: null, idle: null },
        { max_duration_seconds: 'ten' },
      ],
    );
    assert.deepEqual(r.recipients[0].variables, { name: 'A' }, 'conversation columns are no variables');
  });

  it('refuses an unknown or repeated conversation column, naming it', async () => {
    const problems = refused(await csv('to_number,conversation.speed,conversation.interruptions,conversation.interruptions\n'));
    assert.deepEqual(
      problems.map((p) => [p.type, p.column]),
      [
        ['csv_invalid_column', 'conversation.speed'],
        ['csv_duplicate_column', 'conversation.interruptions'],
      ],
    );
    assert.match(problems[0].message, /not a conversation setting; use one of conversation\.interruptions, conversation\.max_duration_seconds/);
  });

  it('accepts a variable name of 64 characters but not 65', async () => {
    const ok = accepted(await csv(`to_number,${'v'.repeat(64)}\n+1555,x\n`));
    assert.equal(ok.recipients.length, 1);
    const problems = refused(await csv(`to_number,${'v'.repeat(65)}\n`));
    assert.equal(problems[0].type, 'csv_invalid_column');
  });

  it('reports a row with the wrong number of fields and keeps the other rows', async () => {
    const r = accepted(await csv('to_number,name,city\n+1555,A,Oslo\n+1666,B\n\n+1777,C,Rome,extra\n,D\n'));
    assert.deepEqual(r.recipients, [{ index: 0, row: 2, to_number: '+1555', variables: { name: 'A', city: 'Oslo' } }]);
    assert.deepEqual(r.problems, [
      { index: 1, row: 3, column: null, reason: 'invalid_row', message: 'row 3 has 2 fields; the header has 3', to_number: '+1666' },
      { index: 2, row: 5, column: null, reason: 'invalid_row', message: 'row 5 has 4 fields; the header has 3', to_number: '+1777' },
      { index: 3, row: 6, column: null, reason: 'invalid_row', message: 'row 6 has 2 fields; the header has 3', to_number: null },
    ]);
  });

  it('reports an empty to_number and too long values, one problem per row', async () => {
    const long = 'x'.repeat(11);
    const r = accepted(await csv(`name,to_number,first_message\nA,,hi\n${long},+1555,${long}\nB,+1666,${'é'.repeat(10)}\n`, { maxValueLength: 10 }));
    assert.deepEqual(r.problems, [
      { index: 0, row: 2, column: 'to_number', reason: 'invalid_value', message: 'row 2 has no to_number', to_number: null },
      {
        index: 1,
        row: 3,
        column: 'name',
        reason: 'invalid_value',
        message: 'row 3: the value of name is longer than 10 characters',
        to_number: '+1555',
      },
    ]);
    assert.deepEqual(r.recipients, [{ index: 2, row: 4, to_number: '+1666', first_message: 'é'.repeat(10), variables: { name: 'B' } }]);
  });

  it('numbers recipients and problems together, names columns as the contract does, and skips a row holding a NUL', async () => {
    const r = accepted(await csv('To_Number,First_Message,name\n+1555,hi\u0000,A\n+1666,,B,extra\n+1777,,C\u0000\n+1\u00008,,D\n+1999,,E\n'));
    assert.deepEqual(r.recipients, [{ index: 4, row: 6, to_number: '+1999', variables: { name: 'E' } }]);
    assert.deepEqual(r.problems, [
      {
        index: 0,
        row: 2,
        column: 'first_message',
        reason: 'invalid_value',
        message: "Row 2: 'first_message' contains a NUL character (U+0000).",
        to_number: '+1555',
      },
      { index: 1, row: 3, column: null, reason: 'invalid_row', message: 'row 3 has 4 fields; the header has 3', to_number: '+1666' },
      { index: 2, row: 4, column: 'name', reason: 'invalid_value', message: "Row 4: 'name' contains a NUL character (U+0000).", to_number: '+1777' },
      { index: 3, row: 5, column: 'to_number', reason: 'invalid_value', message: "Row 5: 'to_number' contains a NUL character (U+0000).", to_number: null },
    ]);
  });

  it('refuses more rows than the limit, counting only non-empty rows', async () => {
    const three = accepted(await csv('to_number\n+1\n\n+2\n,\n+3\n', { maxRows: 3 }));
    assert.equal(three.recipients.length, 3);
    const problems = refused(await csv('to_number\n+1\n+2\n+3\n+4\n+5\n', { maxRows: 3 }));
    assert.deepEqual(
      problems.map((p) => p.type),
      ['csv_too_many_rows'],
    );
  });

  it('refuses a header or row of far too many fields unread, and a record past the size bound (issue 21)', async () => {
    const header = refused(await csv(`to_number${','.repeat(4_000_000)}\n+1555\n`));
    assert.deepEqual(
      header.map((p) => [p.type, p.column]),
      [['csv_too_many_columns', null]],
    );
    assert.match(header[0].message, /the header has more than 152 fields; a file may have at most 102 columns/);
    // Commas inside quotes are values, not fields; a quoted newline does not start a record.
    const quoted = accepted(await csv(`to_number,note\n+1555,"${','.repeat(500)}\n${','.repeat(500)}"\n`, { maxValueLength: 5000 }));
    assert.equal(quoted.recipients.length, 1);
    const row = refused(await csv(`to_number\n+1555\n\n"+1""666",x\n+1777${','.repeat(200)}\n`));
    assert.equal(row[0].type, 'csv_too_many_columns');
    assert.match(row[0].message, /the row starting on line 5 has more than 152 fields/);
    const wideButReadable = accepted(await csv(`to_number\n+1555${','.repeat(120)}\n+1666\n`));
    assert.deepEqual(
      wideButReadable.problems.map((p) => p.reason),
      ['invalid_row'],
    );
    const record = refused(await csv(`to_number,note\n+1555,short\n+1666,${'x'.repeat(300)}\n`, { maxVariables: 1, maxValueLength: 100 }));
    assert.deepEqual(
      record.map((p) => p.type),
      ['csv_record_too_large'],
    );
    assert.match(record[0].message, /line 3 holds more than 300 characters/);
  });

  it('lists at most the first 50 header problems', async () => {
    const problems = refused(await csv(`to_number,${Array.from({ length: 100 }, (_, i) => `bad-${i}`).join(',')}\n+1555\n`));
    assert.equal(problems.length, 50);
    assert.equal(problems[0].column, 'bad-0');
  });

  it('refuses an unclosed quote, naming the line where the row starts', async () => {
    const problems = refused(await csv('to_number,note\n+1555,"a\nb"\n+1666,"never closed\nmore\n'));
    assert.equal(problems.length, 1);
    assert.equal(problems[0].type, 'csv_malformed');
    assert.match(problems[0].message, /line 4\b/);
  });

  it('refuses a stray quote inside an unquoted field', async () => {
    const problems = refused(await csv('to_number,note\n+1555,say "hi"\n'));
    assert.equal(problems[0].type, 'csv_malformed');
    assert.match(problems[0].message, /line 2\b/);
  });

  it('refuses bytes that are not UTF-8', async () => {
    const latin1 = Buffer.concat([Buffer.from('to_number,name\n+1555,'), Buffer.from([0x4a, 0xf6, 0x72, 0x67]), Buffer.from('\n')]);
    const problems = refused(await parseRecipientsCsv(latin1));
    assert.deepEqual(
      problems.map((p) => p.type),
      ['csv_invalid_encoding'],
    );
  });

  it('refuses an empty file, also one with only blank lines or a BOM', async () => {
    for (const text of ['', '\n\r\n  \n', '\uFEFF']) {
      const problems = refused(await csv(text));
      assert.deepEqual(
        problems.map((p) => p.type),
        ['csv_empty'],
        JSON.stringify(text),
      );
    }
  });

  it('accepts a header-only file with no recipients', async () => {
    assert.deepEqual(await csv('to_number,name\n'), { ok: true, recipients: [], problems: [] });
  });

  it('reads a file larger than one parser chunk, with multi-byte characters, in order', async () => {
    const rows = Array.from({ length: 5000 }, (_, i) => `+1555${String(i).padStart(6, '0')},Zoë ${i},"ünïcödé, ${i}"`);
    const r = accepted(await csv(`to_number,name,note\n${rows.join('\n')}\n`));
    assert.equal(r.recipients.length, 5000);
    assert.deepEqual(r.recipients[4999], { index: 4999, row: 5001, to_number: '+1555004999', variables: { name: 'Zoë 4999', note: 'ünïcödé, 4999' } });
    assert.ok(r.recipients.every((rec, i) => rec.row === i + 2 && rec.variables.name === `Zoë ${i}`));
  });
});
