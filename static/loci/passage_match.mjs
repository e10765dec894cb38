/* Which of a page's text spans belong to a cited passage (the PDF viewer marks them).

Whitespace and case differ between the parser's text and pdf.js's, so both are compared squeezed.
Spans are matched as one page string, not one by one: pdf.js gives a name printed with spaces
between its characters ("戴 薇") one span per character, and a span of one or two characters
means nothing alone. A span is marked when most of it lies in a run of at least MIN_RUN characters
that the passage contains. */

export const MIN_RUN = 6;

export const squeeze = (text) => text.toLowerCase().replace(/\s+/g, "");

export function passageSpans(texts, passage) {
  const wanted = squeeze(passage);
  const marked = texts.map(() => false);
  if (!wanted) return marked;
  let page = "";
  const ranges = texts.map((text) => {
    const start = page.length;
    page += squeeze(text);
    return [start, page.length];
  });
  const hit = new Uint8Array(page.length);
  for (let i = 0; i < page.length; ) {
    let end = i;
    while (end < page.length && wanted.includes(page.slice(i, end + 1))) end++;
    if (end - i >= Math.min(MIN_RUN, wanted.length)) {
      hit.fill(1, i, end);
      i = end;
    } else {
      i++;
    }
  }
  ranges.forEach(([start, end], k) => {
    let inside = 0;
    for (let c = start; c < end; c++) inside += hit[c];
    marked[k] = end > start && inside * 2 > end - start;
  });
  return marked;
}
