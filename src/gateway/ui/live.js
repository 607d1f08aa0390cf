/**
 * Live updates: one subscription per tab to the scope's audit feed (/v1/events from now on), shared by every view;
 * `useLive(load, deps, relevant)` loads a view's data and loads it again (debounced) when a relevant event arrives.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { followSse } from './api.js';

const listeners = new Set();
let feed;

/**
 * Told to every view when the feed (re)connects: it follows from "now", so what happened between a view's first load
 * and that moment would be missed; each view loads again instead.
 */
export const FEED_OPENED = { type: 'feed.opened', stream: '', revision: '-1' };

function ensureFeed() {
  if (feed) return;
  feed = new AbortController();
  followSse('/v1/events?after=now', {
    signal: feed.signal,
    onOpen: () => {
      for (const listener of listeners) listener(FEED_OPENED);
    },
    onEvent: (e) => {
      const event = JSON.parse(e.data);
      for (const listener of listeners) listener(event);
    },
  });
}

export function stopFeed() {
  feed?.abort();
  feed = undefined;
}

/** Calls `listener(recordedEvent)` for each event of the scope while the component is mounted. */
export function useFeed(listener) {
  const current = useRef(listener);
  current.current = listener;
  useEffect(() => {
    ensureFeed();
    const forward = (event) => current.current(event);
    listeners.add(forward);
    return () => listeners.delete(forward);
  }, []);
}

/** `{data, error}` of `load()`, loaded again when `deps` change or a feed event passes `relevant(event)`. */
export function useLive(load, deps, relevant = () => true) {
  const [state, setState] = useState({ data: undefined, error: undefined });
  const timer = useRef();
  const reload = () =>
    load().then(
      (data) => setState({ data, error: undefined }),
      (error) => setState((s) => ({ data: s.data, error })),
    );
  useEffect(() => {
    reload();
  }, deps);
  useFeed((event) => {
    if (event !== FEED_OPENED && !relevant(event)) return;
    clearTimeout(timer.current);
    timer.current = setTimeout(reload, 150);
  });
  return state;
}

/** `useLive(load)` again every `ms` while mounted, for state the feed does not announce; stops once refused (4xx). */
export function usePolled(load, ms = 2000) {
  const [tick, setTick] = useState(0);
  const state = useLive(load, [tick], () => false);
  const refused = state.error?.status >= 400 && state.error?.status < 500;
  useEffect(() => {
    if (refused) return;
    const timer = setInterval(() => setTick((n) => n + 1), ms);
    return () => clearInterval(timer);
  }, [refused, ms]);
  return state;
}
