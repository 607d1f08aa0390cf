/**
 * Declares a named effect for `setup({ actions })`. Machines only name effects and compute their params; the runtime
 * runs the handler registered under the same name (ActorType.effects) after the event is appended. The function
 * body is empty on purpose: `transition()` returns the action with its params and never runs it.
 */
export const effect =
  <Params>() =>
  (_args: unknown, _params: Params): void => {};
