// Browser test of a chat answer whose LLM call fails, driven by tests/browser/test_ui.py (the API
// runs with a model whose provider answers HTTP 500).
//
// usage: node failed_answer.mjs CONFIG.json   (base, question, doc_name, screenshots, chromium,
//                                              playwright_core, api_key)
// Prints one JSON object {ok, steps: {...}} on stdout; exits 1 with {ok: false, step, error} on failure.
import { finish, launch } from "./harness.mjs";

const h = await launch();
const { cfg, base, shots, page } = h;
const out = { ok: false, steps: {} };
let step = "launch";
if (cfg.api_key) await page.addInitScript((k) => localStorage.setItem("ragaudit.apiKey", k), cfg.api_key);

try {
  step = "ask";
  await page.goto(`${base}/#/`);
  await page.locator(`[data-testid=doc][data-name="${cfg.doc_name}"][data-status=ready]`).waitFor();
  await page.getByTestId("question").fill(cfg.question);
  await page.getByTestId("ask").click();
  const turn = page.locator("[data-testid=turn]").first();
  await page.locator("[data-testid=turn][data-status=error]").first().waitFor();
  out.steps.error = await turn.getByTestId("turn-error").innerText();
  out.steps.failed_chip = (await turn.getByTestId("xray-failed").count()) ? await turn.getByTestId("xray-failed").innerText() : null;
  out.steps.xray_rows = await turn.locator("[data-testid=xray] [data-testid=xray-row]").evaluateAll((rows) => rows.map((r) => r.dataset.chunk));
  out.steps.rules_box = await turn.getByTestId("xray-rules").count();
  out.steps.timings_bar = await turn.getByTestId("timings-bar").count();
  out.steps.page_text = await page.locator("body").innerText();
  if (shots) await page.screenshot({ path: `${shots}/chat-failed.png`, fullPage: false });
  await finish(h, out);
} catch (error) {
  await finish(h, out, { step, error });
}
