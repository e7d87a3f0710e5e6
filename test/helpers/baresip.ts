/**
 * baresip (Debian's) as a second real phone on loopback: it answers every call by itself, plays a WAV
 * file as its microphone and records what it hears (its sndfile module writes the decoded audio of
 * each call to a WAV file). Its own RTP ports, bound to 127.0.0.1 so the address its SDP gives is the
 * one its packets come from.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, LOOPBACK } from './sipp.js';

export interface Baresip {
  port: number;
  /** Resolves when baresip reports a call over (its recording is then complete). */
  callOver(): Promise<void>;
  /** PCM16 LE 8 kHz of what it heard in its (first) call. */
  heard(): Buffer;
  stop(): Promise<void>;
}

/** `microphone`: a WAV file (PCM16, 8 kHz, mono) baresip plays into each call; `user`: the one it answers calls to (a number, for a trunk's calls). */
export async function startBaresip(microphone: string, user = 'bob'): Promise<Baresip> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baresip-'));
  const port = await freePort();
  const rtp = await freePort();
  fs.writeFileSync(
    path.join(dir, 'config'),
    [
      'poll_method epoll',
      `sip_listen ${LOOPBACK}:${port}`,
      `net_interface ${LOOPBACK}`,
      'audio_player aubridge,nowhere',
      `audio_source aufile,${microphone}`,
      'audio_alert aubridge,nowhere',
      'audio_srate 8000',
      'audio_channels 1',
      `rtp_ports ${rtp}-${rtp + 20}`,
      'module_path /usr/lib/baresip/modules',
      'module g711.so',
      'module aufile.so',
      'module aubridge.so',
      'module sndfile.so',
      'module_app account.so',
      'module_app menu.so',
      `snd_path ${dir}`,
      '',
    ].join('\n'),
  );
  fs.writeFileSync(path.join(dir, 'accounts'), `<sip:${user}@${LOOPBACK}>;regint=0;answermode=auto;audio_codecs=PCMU\n`);
  const child: ChildProcess = spawn('baresip', ['-f', dir, '-t', '120'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const waiters: Array<{ text: RegExp; resolve: () => void }> = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of [...waiters]) if (w.text.test(out)) w.resolve();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const waitFor = (text: RegExp) =>
    new Promise<void>((resolve, reject) => {
      if (text.test(out)) return resolve();
      waiters.push({ text, resolve });
      void exited.then(() => reject(new Error(`baresip exited:\n${out.slice(-3000)}`)));
    });
  await waitFor(/baresip is ready/);
  return {
    port,
    callOver: () => waitFor(/terminated \(duration/),
    heard: () => {
      const file = fs.readdirSync(dir).find((f) => f.endsWith('-dec.wav'));
      if (!file) throw new Error(`baresip recorded nothing:\n${out.slice(-3000)}`);
      return fs.readFileSync(path.join(dir, file)).subarray(44);
    },
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
