// Browser test of a chat answer whose LLM call fails, driven by tests/browser/test_ui.py (the API
// runs with a model whose provider answers HTTP 500). Headless Debian Chromium through
// playwright-core; no browser download.
//
// usage: node failed_answer.mjs CONFIG.json   (base, question, doc_name, screenshots, chromium,
//                                              playwright_core, api_key)
// Prints one JSON object {ok, steps: {...}} on stdout; exits 1 with {ok: false, step, error} on failure.
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { chromium } = require(cfg.playwright_core);
const base = cfg.base.replace(/\/$/, "");
const shots = cfg.screenshots;
if (shots) mkdirSync(shots, { recursive: true });
const out = { ok: false, steps: {} };
let step = "launch";

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
});
const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
page.setDefaultTimeout(60_000);
const consoleErrors = [];
page.on("pageerror", (e) => consoleErrors.push(String(e)));
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
  out.steps.page_errors = consoleErrors;
  out.ok = true;
} catch (e) {
  out.step = step;
  out.error = String(e?.stack ?? e);
  out.steps.page_errors = consoleErrors;
  if (shots) await page.screenshot({ path: `${shots}/failure-failed-${step}.png` }).catch(() => {});
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
