/**
 * What a call threw, for tests that assert on the error's fields (class, code, option, message)
 * rather than only that something was thrown. A call that does not throw fails the test.
 */
export function caught(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("did not throw");
}

/** What a call threw, or undefined when it returned: for tests that check what is accepted as well as what is not. */
export function thrownBy(run: () => unknown): unknown {
  try {
    run();
    return undefined;
  } catch (error) {
    return error;
  }
}

/** The same for an async call: what it rejected with. */
export async function caughtAsync(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error("did not throw");
}
