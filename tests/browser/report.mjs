// Opens an `rlvr report` file in headless Chromium, uses it as a person would (hover a point, pick a step,
// pick a reward filter) and prints what it shows, as JSON.
//   node tests/browser/report.mjs file:///path/report.html '{"step": 2}' [screenshot.png]
import { chromium } from 'playwright-core';

const [url, spec, shot] = [process.argv[2], JSON.parse(process.argv[3] || '{}'), process.argv[4]];
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
const out = { dialogs: 0, requests: [] };
page.on('dialog', async (dialog) => { out.dialogs += 1; await dialog.dismiss(); });
page.on('request', (r) => { if (!r.url().startsWith('file:')) out.requests.push(r.url()); });

await page.goto(url);
out.title = await page.title();
out.charts = await page.$$eval('svg.chart', (svgs) => svgs.map((svg) => ({
  title: svg.getAttribute('aria-label'),
  xTicks: Array.from(svg.querySelectorAll('text.x-tick')).map((t) => t.textContent),
  yTicks: Array.from(svg.querySelectorAll('text.y-tick')).map((t) => t.textContent),
  xLabel: svg.querySelector('text.x-label')?.textContent,
  legend: Array.from(svg.querySelectorAll('g.legend text')).map((t) => t.textContent),
  series: Array.from(svg.querySelectorAll('polyline')).map((p) => [p.getAttribute('data-series'), p.getAttribute('data-values')]),
})));

// hover every point of the first chart: the value beside it is hidden before and shown while hovered
out.hover = [];
const points = await page.$$('svg.chart >> nth=0 >> g.pt');
for (const point of points) {
  const [tip, circle] = [await point.$('text.tip'), await point.$('circle')];
  const hidden = await tip.evaluate((t) => getComputedStyle(t).visibility);
  await circle.scrollIntoViewIfNeeded();
  const box = await circle.boundingBox();
  const [cx, cy] = [box.x + box.width / 2, box.y + box.height / 2];
  await page.mouse.move(cx, cy);
  out.hover.push({
    // where lines meet, the pointer is on the point drawn last: only that one is hovered
    onTop: await circle.evaluate((c, [x, y]) => document.elementFromPoint(x, y) === c, [cx, cy]),
    series: await point.getAttribute('data-series'),
    x: Number(await point.getAttribute('data-x')),
    before: hidden,
    during: await tip.evaluate((t) => getComputedStyle(t).visibility),
    text: await tip.textContent(),
  });
}
await page.mouse.move(0, 0);

const visibleGroups = () => page.$$eval('#r0-samples .group', (gs) => gs.filter((g) => g.checkVisibility()).map((g) => g.getAttribute('data-step')));
const visibleRewards = () => page.$$eval('#r0-samples tr.c', (rs) => rs.filter((r) => r.checkVisibility()).map((r) => r.querySelector('td').textContent));
out.groupsAll = await visibleGroups();
if (spec.step !== undefined) {
  await page.click(`label[for="r0-step-${spec.step}"]`);
  out.groupsAtStep = await visibleGroups();
  await page.click('label[for="r0-step-all"]');
}
await page.click('label[for="r0-reward-pos"]');
out.rewardsPositive = await visibleRewards();
await page.click('label[for="r0-reward-nonpos"]');
out.rewardsNonPositive = await visibleRewards();
await page.click('label[for="r0-reward-all"]');
out.rewardsAll = await visibleRewards();

out.completions = await page.$$eval('pre.completion', (els) => els.map((e) => e.textContent));
out.summaryCells = await page.$$eval('table.accuracy tr', (rows) => rows.map((r) => Array.from(r.children).map((c) => c.textContent)));
out.rawFolded = await page.$eval('details pre', (e) => !e.checkVisibility());
out.scripts = await page.$$eval('script', (els) => els.length);
out.pwned = await page.evaluate(() => window.__pwned === true);
if (shot) { await page.evaluate(() => window.scrollTo(0, 0)); await page.screenshot({ path: shot, fullPage: false }); }
await browser.close();
console.log(JSON.stringify(out));
