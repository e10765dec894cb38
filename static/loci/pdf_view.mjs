/* The PDF viewer: the original at the cited page, the cited passage highlighted in pdf.js's text layer. */
import * as pdfjsLib from "../vendor/pdfjs/pdf.min.mjs";
import { passageSpans } from "./passage_match.mjs";

const root = document.getElementById("pdf-viewer");
pdfjsLib.GlobalWorkerOptions.workerSrc = root.dataset.worker;
const passage = JSON.parse(document.getElementById("pdf-passage").textContent || '""');
const status = root.querySelector("[data-pdf-status]");
const pageBox = root.querySelector("[data-pdf-page]");
const label = document.querySelector("[data-pdf-page-label]");
const wanted = passage.trim();
let pdf = null;
let current = Number(root.dataset.page) || 1;

async function show(number) {
  const page = await pdf.getPage(number);
  const viewport = page.getViewport({ scale: Math.min(1.6, (pageBox.parentElement.clientWidth - 32) / page.getViewport({ scale: 1 }).width) });
  const canvas = pageBox.querySelector("canvas");
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.floor(viewport.width * ratio);
  canvas.height = Math.floor(viewport.height * ratio);
  canvas.style.width = viewport.width + "px";
  canvas.style.height = viewport.height + "px";
  pageBox.style.width = viewport.width + "px";
  pageBox.style.height = viewport.height + "px";
  pageBox.style.setProperty("--scale-factor", viewport.scale);
  await page.render({ canvasContext: canvas.getContext("2d"), viewport,
    transform: ratio !== 1 ? [ratio, 0, 0, ratio, 0, 0] : null }).promise;
  const old = pageBox.querySelector(".textLayer");
  const layer = document.createElement("div");
  layer.className = "textLayer";
  old.replaceWith(layer);
  const textLayer = new pdfjsLib.TextLayer({ textContentSource: await page.getTextContent(), container: layer, viewport });
  await textLayer.render();
  // pdf.js measures text on a canvas it appends to <body>: nothing to read there, so hide it from
  // assistive technology (it would sit outside every landmark).
  document.querySelectorAll("body > .hiddenCanvasElement").forEach((c) => c.setAttribute("aria-hidden", "true"));
  let marked = 0;
  if (wanted) {
    const spans = [...layer.querySelectorAll("span")];
    passageSpans(spans.map((span) => span.textContent), passage).forEach((hit, k) => {
      if (hit) { spans[k].classList.add("pdf-hit"); marked++; }
    });
  }
  const first = layer.querySelector(".pdf-hit");
  if (first) first.scrollIntoView({ block: "center" });
  current = number;
  label.textContent = "page " + number + " of " + pdf.numPages;
  status.textContent = wanted ? (marked ? "" : "The cited passage is not on this page's text layer (a scan?).") : "";
  root.dataset.rendered = String(number);
  root.dataset.hits = String(marked);
}

document.querySelector("[data-pdf-prev]").addEventListener("click", () => { if (pdf && current > 1) show(current - 1); });
document.querySelector("[data-pdf-next]").addEventListener("click", () => { if (pdf && current < pdf.numPages) show(current + 1); });

try {
  pdf = await pdfjsLib.getDocument({ url: root.dataset.src, isEvalSupported: false }).promise;
  await show(Math.min(Math.max(1, current), pdf.numPages));
} catch (err) {
  status.textContent = "The PDF could not be shown here (" + err.message + "); download the original instead.";
  root.dataset.rendered = "error";
}
