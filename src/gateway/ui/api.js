/**
 * The console's only way to the server: the /v1 API with the signed-in token (kept in sessionStorage, this tab
 * only), errors in the API's {error:{code,message}} shape, and server-sent events read through fetch so the token
 * travels in the Authorization header, never in a URL.
 */
const KEY = 'berth.token';

export const token = () => sessionStorage.getItem(KEY);
export const signIn = (value) => sessionStorage.setItem(KEY, value);
export const signOut = () => sessionStorage.removeItem(KEY);

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function failure(response) {
  const body = await response.json().catch(() => null);
  const error = body?.error ?? {};
  return new ApiError(response.status, error.code ?? 'http_' + response.status, error.message ?? response.statusText);
}

/** JSON of a /v1 call, or an ApiError. `init.body` is sent as JSON. */
export async function api(path, init = {}, bearer = token()) {
  const headers = { authorization: `Bearer ${bearer}` };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
  });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/**
 * Follows an SSE route (`path`: a string, or a function asked again at each connection), calling `onEvent({id, event, data})` for each event; reconnects after a drop with the last
 * id (Last-Event-ID), until `signal` aborts or `onEvent` returns 'stop'. `onError` hears refusals (4xx: no retry).
 */
export async function followSse(path, { signal, onEvent, onError, onOpen, lastEventId }) {
  let last = lastEventId;
  while (!signal.aborted) {
    try {
      const headers = { authorization: `Bearer ${token()}` };
      if (last !== undefined) headers['last-event-id'] = last;
      const response = await fetch(typeof path === 'function' ? path() : path, { headers, signal });
      if (!response.ok) {
        const error = await failure(response);
        onError?.(error);
        if (response.status < 500) return;
      } else {
        onOpen?.();
        // A response that ends without 'stop' (a restarting server ends its streams) is followed again.
        if ((await readEvents(response.body, (e) => ((last = e.id ?? last), onEvent(e)))) === 'stop') return;
      }
    } catch (error) {
      if (signal.aborted) return;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return 'ended';
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { data: '' };
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') data.push(text);
        else if (field === 'id' || field === 'event') event[field] = text;
      }
      if (data.length === 0) continue;
      event.data = data.join('\n');
      if (onEvent(event) === 'stop') {
        reader.cancel().catch(() => {});
        return 'stop';
      }
    }
  }
}
