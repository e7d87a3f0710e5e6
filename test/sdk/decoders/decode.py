"""Decodes real webhook bodies with Modelina's Python models (pydantic preset).

argv: the models' directory (holding the `voice` package), the bodies file (JSON lines of
{"kind", "body"}). Prints one JSON line a body: {"kind", "ok", "error"?, "checks"?}.
"""
import importlib
import json
import sys

sys.path.insert(0, sys.argv[1])
CLASSES = {
    'call.completed': ('voice.call_completed_event', 'CallCompletedEvent'),
    'batch.completed': ('voice.batch_completed_event', 'BatchCompletedEvent'),
    'call.status_changed': ('voice.call_status_changed_event', 'CallStatusChangedEvent'),
    'call.transcript': ('voice.call_transcript_event', 'CallTranscriptEvent'),
}

for line in open(sys.argv[2]):
    item = json.loads(line)
    module, name = CLASSES[item['kind']]
    try:
        model = getattr(importlib.import_module(module), name).model_validate(item['body'])
        checks = {'event': getattr(model.event, 'value', model.event)}
        recording = getattr(model, 'recording', None)
        if recording is not None:
            checks['channels'] = recording.channels.value
            checks['sample_rate'] = recording.sample_rate.value
        print(json.dumps({'kind': item['kind'], 'ok': True, 'checks': checks}))
    except Exception as e:  # noqa: BLE001 - the test reports every failure
        print(json.dumps({'kind': item['kind'], 'ok': False, 'error': f'{type(e).__name__}: {e}'[:500]}))
