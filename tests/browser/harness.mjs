// What every browser script of tests/browser shares: its config (the JSON file named by its first
// argument: base, chromium, playwright_core, screenshots, api_key, ...), headless Debian Chromium
// through playwright-core (no browser download), and the one JSON line it prints at the end.
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

/** The config, and a page of a new headless Chromium whose page errors are collected. */
export async function launch(viewport = { width: 1500, height: 1000 }) {
  const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const { chromium } = createRequire(import.meta.url)(cfg.playwright_core);
  const shots = cfg.screenshots;
  if (shots) mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
  });
  const page = await browser.newPage({ viewport });
  page.setDefaultTimeout(60_000);
  const consoleErrors = [];
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  return { cfg, base: cfg.base.replace(/\/$/, ""), shots, browser, page, consoleErrors };
}

/** Close the browser, print ``{ok, steps[, step, error]}`` as one JSON line and exit (1 on an
 * error: ``failed`` is ``{step, error}``; a screenshot of the failing page is kept). */
export async function finish(h, out, failed = null) {
  out.steps.page_errors = h.consoleErrors;
  if (failed) {
    out.step = failed.step;
    out.error = String(failed.error?.stack ?? failed.error);
    if (h.shots) await h.page.screenshot({ path: `${h.shots}/failure-${failed.step}.png` }).catch(() => {});
  } else {
    out.ok = true;
  }
  await h.browser.close();
  console.log(JSON.stringify(out));
  process.exit(out.ok ? 0 : 1);
}
