/**
 * A promise and the function that resolves it, for tests that hold a handler or a store call until
 * the test lets it go.
 */
export function deferred(): { readonly promise: Promise<void>; readonly resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}
