// An error response must use the `Error` envelope ({error: {...}}) or the list-shaped `ValidationErrorList`
// ({detail: [...]}) in application/json.
export default function errorEnvelope(response) {
  const schema = response?.content?.['application/json']?.schema;
  if (!schema) return [{ message: 'Error response has no application/json body.' }];
  const required = schema.required ?? [];
  if (required.includes('error') && schema.properties?.error) return;
  if (required.includes('detail') && schema.properties?.detail?.type === 'array') return;
  return [{ message: 'Error response does not use the error envelope or the list-shaped 422.' }];
}
