// The bindings of ./wrangler.toml, as `env` from "cloudflare:workers" sees them in the tests.
declare namespace Cloudflare {
  type TestEnv = import("./worker.js").TestEnv;
  interface Env extends TestEnv {}
}
