/**
 * Redaction's cost on the transcript (issue 36): `npm run bench -- redaction`. The same
 * BENCH_REDACTION_ENTRIES (20,000) transcript entries, phone-call utterances of 40-200 characters of
 * which one in five holds a card number, an email or a phone number, are kept as the engine keeps
 * them: copied as they are (no setting, the baseline), and redacted with every built-in kind, and with
 * every built-in kind and three custom patterns. Each case BENCH_REDACTION_REPS (5) times after a
 * warm-up, in this process, on the event loop as the service runs it; entries per second, median.
 */
import { Redactor } from '../../src/redaction/redactor.js';
import { ENTITIES } from '../../src/redaction/recognisers.js';
import { checkRedactionSetting } from '../../src/redaction/setting.js';
import type { TranscriptTurn } from '../../src/voice/types.js';
import { percentile, table } from './lib.js';

const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);

const PLAIN = [
  'Hello, this is Sam, I am calling about my appointment next week.',
  'Can you move it to Wednesday afternoon, around three if you have anything?',
  'Yes that works for me, thank you so much for your help today.',
  'I would like to know whether the clinic on Main Street is open on Saturdays and until when.',
  'No, that is everything, goodbye.',
];
const SENSITIVE = [
  'My card number is 4111 1111 1111 1111 and it expires in December.',
  'You can write to me at ada.lovelace@example.co.uk whenever it suits you.',
  'Call me back on +44 20 7946 0958 after six please.',
];

function entries(n: number): TranscriptTurn[] {
  return Array.from({ length: n }, (_, i) => ({
    role: i % 2 ? 'model' : 'user',
    text: i % 5 === 0 ? SENSITIVE[(i / 5) % SENSITIVE.length] : PLAIN[i % PLAIN.length],
    timestamp: 1_800_000_000 + i,
  }));
}

function perSecond(keep: (t: TranscriptTurn) => TranscriptTurn, turns: TranscriptTurn[], reps: number): number {
  for (const t of turns.slice(0, 1000)) keep(t);
  const rates: number[] = [];
  for (let r = 0; r < reps; r++) {
    const started = performance.now();
    let kept = 0;
    for (const t of turns) kept += keep(t).text.length;
    if (kept === 0) throw new Error('nothing kept');
    rates.push(turns.length / ((performance.now() - started) / 1000));
  }
  return percentile(
    rates.sort((a, b) => a - b),
    50,
  );
}

export async function run(): Promise<void> {
  const turns = entries(num('BENCH_REDACTION_ENTRIES', 20_000));
  const reps = num('BENCH_REDACTION_REPS', 5);
  const builtIn = new Redactor(checkRedactionSetting({ entities: [...ENTITIES], targets: ['transcript'] })!, '+14155550123');
  const withPatterns = new Redactor(
    checkRedactionSetting({
      entities: [...ENTITIES],
      custom_patterns: [
        { name: 'order_id', pattern: 'ORD-[0-9]{6}' },
        { name: 'member_id', pattern: '(?i)member (?:number |id )?[A-Z]{2}[0-9]{6}' },
        { name: 'iban', pattern: '[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){3,7}' },
      ],
      targets: ['transcript'],
    })!,
    '+14155550123',
  );
  const none = perSecond((t) => ({ ...t }), turns, reps);
  const rows = [
    { case: 'no setting (copied as kept)', 'entries/s': Math.round(none), 'µs/entry': (1e6 / none).toFixed(2) },
    ...[
      ['8 built-in kinds', builtIn],
      ['8 built-in kinds + 3 custom patterns', withPatterns],
    ].map(([name, r]) => {
      const rate = perSecond((t) => (r as Redactor).turn(t), turns, reps);
      return { case: name as string, 'entries/s': Math.round(rate), 'µs/entry': (1e6 / rate).toFixed(2) };
    }),
  ];
  table(rows);
}
