/** A webhook delivery log: what was sent where, and how the target answered. */
import type { Schemas } from '../api-types.js';
import { Status, When } from '../ui.js';

export function DeliveryTable({ deliveries }: { deliveries: Array<Schemas['WebhookDelivery']> }) {
  if (deliveries.length === 0) return <p class="muted">No deliveries.</p>;
  return (
    <table>
      <thead>
        <tr>
          <th>Event</th>
          <th>Target</th>
          <th>Result</th>
          <th>Signed</th>
          <th>Time</th>
          <th>At</th>
        </tr>
      </thead>
      <tbody>
        {deliveries.map((d) => (
          <tr key={d.delivery_id}>
            <td>
              {d.event}
              <br />
              <small class="muted">{d.call_id ?? d.batch_id}</small>
            </td>
            <td class="url">{d.target_url}</td>
            <td>
              <Status value={d.status} /> {d.status_code ?? ''} {d.error && <span class="muted">{d.error.replace(/_/g, ' ')}</span>}
            </td>
            <td>{d.signed ? 'yes' : 'no'}</td>
            <td>{d.duration_ms} ms</td>
            <td>
              <When iso={d.created_at} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
