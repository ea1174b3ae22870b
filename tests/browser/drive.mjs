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

// The explorer is driven the way a person uses it: no Update button, every edit resubmits the form.
async function edit(selector, action) {
  await Promise.all([page.waitForNavigation(), action(selector)]);
}
for (const c of spec.explorer || []) {
  await page.goto(base + `/explore?g=${c.rewards.length}`);
  for (const [i, r] of c.rewards.entries()) {
    await page.fill(`input[name=r${i}]`, String(r));
    await edit(`input[name=r${i}]`, (s) => page.press(s, 'Tab'));
  }
  for (const name of ['baseline', 'scale', 'std_estimator']) {
    const selector = `select[name=${name}]`;
    if ((await page.$eval(selector, (e) => e.value)) !== c[name]) await edit(selector, (s) => page.selectOption(s, c[name]));
  }
  await page.fill('input[name=clip]', String(c.clip));
  await edit('input[name=clip]', (s) => page.press(s, 'Tab'));
  out.explorer.push({
    advantages: await page.$$eval('td.adv', (els) => els.map((e) => Number(e.textContent))),
    text: await page.textContent('body'),
  });
}
await browser.close();
console.log(JSON.stringify(out));
