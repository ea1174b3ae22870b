// Drives rlvr's dashboard in headless Chromium and prints what the pages show, as JSON.
//   node tests/browser/drive.mjs BASE_URL '{"explorer": [{"rewards": [...], "baseline": ..., "scale": ..., "std_estimator": ...}]}'
import { chromium } from 'playwright-core';

const [base, spec] = [process.argv[2], JSON.parse(process.argv[3] || '{}')];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage();
const out = { dialogs: 0, explorer: [] };
page.on('dialog', async (dialog) => { out.dialogs += 1; await dialog.dismiss(); });

await page.goto(base + '/');
out.title = await page.title();
out.series = await page.$$eval('polyline', (els) => els.map((e) => [e.closest('svg').getAttribute('aria-label'), e.getAttribute('data-series'), e.getAttribute('data-values')]));

await page.goto(base + '/run/0');
out.completions = await page.$$eval('pre.completion', (els) => els.map((e) => e.textContent));
out.rows = await page.$$eval('tr', (rows) => rows.map((r) => Array.from(r.querySelectorAll('td')).map((c) => c.textContent)));
out.scripts = await page.$$eval('script', (els) => els.length);
out.pwned = await page.evaluate(() => window.__pwned === true);

for (const c of spec.explorer || []) {
  await page.goto(base + '/explore');
  await page.fill('input[name=g]', String(c.rewards.length));
  await page.click('button[type=submit]');
  for (const [i, r] of c.rewards.entries()) await page.fill(`input[name=r${i}]`, String(r));
  for (const name of ['baseline', 'scale', 'std_estimator']) await page.selectOption(`select[name=${name}]`, c[name]);
  await page.click('button[type=submit]');
  out.explorer.push(await page.$$eval('td.adv', (els) => els.map((e) => Number(e.textContent))));
}
await browser.close();
console.log(JSON.stringify(out));
