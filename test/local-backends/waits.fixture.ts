/** The one test of guard-fixture.config.ts: it waits until its run is killed. */
import { it } from "vitest";

it("waits", async () => {
  await new Promise((resolve) => setTimeout(resolve, 110_000));
});
