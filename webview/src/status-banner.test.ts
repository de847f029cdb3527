import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hostToCompareSchema, hostToDashboardSchema, hostToInspectorSchema, parseMessage } from './messages.ts';
import { DISCONNECTED, DISCONNECTED_CHARTS, statusText } from './status-banner.ts';

test("every webview's banner says the same for the host's connection and error messages", () => {
  for (const [schema, disconnected] of [[hostToDashboardSchema, DISCONNECTED_CHARTS], [hostToCompareSchema, DISCONNECTED_CHARTS], [hostToInspectorSchema, DISCONNECTED]] as const) {
    const says = (data: unknown) => {
      const parsed = parseMessage(schema, data, 'host');
      assert.ok(parsed.ok);
      const m = parsed.message;
      assert.ok(m.type === 'connection' || m.type === 'error');
      return statusText(m, disconnected);
    };
    assert.equal(says({ type: 'connection', connected: false }), disconnected);
    assert.equal(says({ type: 'connection', connected: true }), null, 'connected again: the banner goes');
    assert.equal(says({ type: 'error', message: 'Could not load run r1: gone' }), 'Could not load run r1: gone');
  }
});
