/**
 * The widget's stylesheet. Every colour and size is a custom property set on :host, so a page overrides
 * it on the element (`voice-agent-widget { --vaw-accent: #7c3aed }`): the page's own rules win over :host.
 */
export const STYLES = `
:host {
  --vaw-font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  --vaw-font-size: 15px;
  --vaw-width: 360px;
  --vaw-log-height: 220px;
  --vaw-background: #ffffff;
  --vaw-color: #1f2328;
  --vaw-muted-color: #59636e;
  --vaw-border-color: #d1d9e0;
  --vaw-radius: 12px;
  --vaw-shadow: 0 4px 16px rgba(31, 35, 40, 0.12);
  --vaw-accent: #0b57d0;
  --vaw-accent-color: #ffffff;
  --vaw-danger: #b3261e;
  --vaw-live: #1a7f37;
  --vaw-button-background: #f6f8fa;
  --vaw-agent-bubble: #eef2f7;
  --vaw-user-bubble: #dce8fc;
  display: block;
  width: var(--vaw-width);
  max-width: 100%;
  font-family: var(--vaw-font-family);
  font-size: var(--vaw-font-size);
  line-height: 1.4;
  color: var(--vaw-color);
}
:host([hidden]) { display: none; }
*, *::before, *::after { box-sizing: border-box; }
.panel {
  display: flex;
  flex-direction: column;
  gap: 8px;
  padding: 12px;
  background: var(--vaw-background);
  border: 1px solid var(--vaw-border-color);
  border-radius: var(--vaw-radius);
  box-shadow: var(--vaw-shadow);
}
header { display: flex; align-items: center; gap: 8px; }
.dot { flex: none; width: 10px; height: 10px; border-radius: 50%; background: var(--vaw-muted-color); }
.panel[data-state="starting"] .dot { background: var(--vaw-accent); animation: pulse 1s ease-in-out infinite; }
.panel[data-state="live"] .dot { background: var(--vaw-live); }
@keyframes pulse { 50% { opacity: 0.3; } }
.name { flex: 1; min-width: 0; font-weight: 600; font-size: 1.05em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.log {
  display: flex;
  flex-direction: column;
  gap: 6px;
  height: var(--vaw-log-height);
  overflow-y: auto;
  padding: 2px;
}
.log:empty::before { content: attr(data-empty); margin: auto; color: var(--vaw-muted-color); text-align: center; }
.entry { margin: 0; max-width: 85%; padding: 6px 10px; border-radius: calc(var(--vaw-radius) - 2px); white-space: pre-wrap; overflow-wrap: anywhere; }
.entry.model { align-self: flex-start; background: var(--vaw-agent-bubble); }
.entry.user { align-self: flex-end; background: var(--vaw-user-bubble); }
.who { display: block; font-size: 0.8em; font-weight: 600; color: var(--vaw-muted-color); }
.caption { margin: 0; min-height: 1.4em; color: var(--vaw-muted-color); font-style: italic; }
.caption:empty { display: none; }
.status { margin: 0; min-height: 1.4em; font-size: 0.9em; color: var(--vaw-muted-color); }
.status.error { color: var(--vaw-danger); }
form, .controls { display: flex; gap: 6px; }
.controls { flex-wrap: wrap; }
input {
  flex: 1;
  min-width: 0;
  padding: 7px 10px;
  font: inherit;
  color: inherit;
  background: var(--vaw-background);
  border: 1px solid var(--vaw-border-color);
  border-radius: calc(var(--vaw-radius) / 2);
}
button {
  display: inline-flex;
  align-items: center;
  justify-content: center;
  gap: 6px;
  padding: 7px 12px;
  font: inherit;
  font-weight: 500;
  color: var(--vaw-color);
  background: var(--vaw-button-background);
  border: 1px solid var(--vaw-border-color);
  border-radius: calc(var(--vaw-radius) / 2);
  cursor: pointer;
}
button svg { width: 18px; height: 18px; fill: currentColor; flex: none; }
button[aria-pressed="true"] { color: var(--vaw-accent-color); background: var(--vaw-accent); border-color: var(--vaw-accent); }
button.start { flex: 1 1 100%; color: var(--vaw-accent-color); background: var(--vaw-accent); border-color: var(--vaw-accent); }
.panel[data-state="starting"] button.start, .panel[data-state="live"] button.start { background: var(--vaw-danger); border-color: var(--vaw-danger); }
button:disabled, input:disabled { opacity: 0.55; cursor: not-allowed; }
:focus-visible { outline: 2px solid var(--vaw-accent); outline-offset: 2px; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
@media (prefers-reduced-motion: reduce) { .dot { animation: none !important; } }
`;
