// The JavaScript unit tests' harness: test declares a test, eq and ok
// check, run runs every test declared and publishes the results in
// window.testResults ({done, results: [{name, error}]}) and #out, where
// runJSTests (ui/browser_test.go) reads them.

const tests = [];

// test declares a test; fn may be async.
export const test = (name, fn) => tests.push({ name, fn });

// eq fails unless got and want are the same as JSON.
export function eq(got, want, what) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what || "value"}: got ${g}, want ${w}`);
}

// ok fails with what unless cond.
export function ok(cond, what) {
  if (!cond) throw new Error(what);
}

// run runs the tests declared, in order.
export async function run() {
  const results = [];
  for (const t of tests) {
    try {
      await t.fn();
      results.push({ name: t.name, error: "" });
    } catch (e) {
      results.push({ name: t.name, error: String(e && e.stack ? e.stack : e) });
    }
  }
  document.getElementById("out").textContent = results.map((r) => `${r.error ? "FAIL" : "ok  "} ${r.name}${r.error ? "\n  " + r.error : ""}`).join("\n");
  window.testResults = { done: true, results };
}
