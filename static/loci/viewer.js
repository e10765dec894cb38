/* The original viewers (sheet, slides, cues, email): bring the cited place into view. */
(function () {
  const cited = document.querySelector("[data-cited]");
  if (cited) cited.scrollIntoView({ block: "center" });
  document.documentElement.dataset.viewerReady = cited ? "cited" : "none";
})();
