/* Loci console: small progressive enhancements. Every page works without this file except the uploader. */
(function () {
  "use strict";

  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const csrfToken = () => ($('meta[name="csrf-token"]') || {}).content || "";
  const ACTIVE = ["queued", "parsing", "extracting", "indexing"];
  const STAGES = ["queued", "parsing", "extracting", "indexing", "ready"];
  const POLL_MS = 1000;

  function fmtBytes(n) {
    const units = ["B", "KB", "MB", "GB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }

  const plural = (n, word) => n + " " + word + (n === 1 ? "" : "s");

  /* Header switchers submit as soon as a choice is made. */
  $$("form[data-autosubmit] select").forEach((select) => {
    select.addEventListener("change", () => select.form.submit());
  });

  /* "/" jumps to the page's main search or filter box, as on most search-heavy tools. */
  document.addEventListener("keydown", (event) => {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    const tag = (document.activeElement && document.activeElement.tagName) || "";
    if (["INPUT", "TEXTAREA", "SELECT"].includes(tag) || document.activeElement.isContentEditable) return;
    const box = $("[data-hotkey-focus]");
    if (box) { event.preventDefault(); box.focus(); box.select && box.select(); }
  });

  /* A new knowledge base's slug follows its name until the slug is edited by hand. */
  $$("[data-slug-from]").forEach((slug) => {
    const source = document.getElementById(slug.dataset.slugFrom);
    if (!source) return;
    let touched = slug.value !== "";
    slug.addEventListener("input", () => { touched = true; });
    source.addEventListener("input", () => {
      if (touched) return;
      slug.value = source.value.toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "")
        .replace(/[^a-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 64);
    });
  });

  /* A destructive button stays disabled until the confirmation text matches. */
  $$("[data-confirm-value]").forEach((input) => {
    const button = $("[data-confirm-target]", input.form);
    const sync = () => { button.disabled = input.value.trim() !== input.dataset.confirmValue; };
    input.addEventListener("input", sync);
    sync();
  });

  $$("[data-details-toggle]").forEach((button) => {
    button.addEventListener("click", () => {
      const open = button.dataset.detailsToggle === "open";
      $$("details.children").forEach((d) => { d.open = open; });
    });
  });

  /* Source links end in #chunk-<id>: open the collapsed section that holds the chunk and scroll to it. */
  function revealTarget() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!/^(chunk|memory)-/.test(id)) return;
    const el = document.getElementById(id);
    if (!el) {
      // The chunk is on another page of a long document: let the server find its page.
      const params = new URLSearchParams(location.search);
      const match = id.match(/^chunk-(\d+)$/);
      if (match && $(".structure .pagination") && params.get("chunk") !== match[1]) {
        params.set("chunk", match[1]);
        params.delete("page");
        location.replace(location.pathname + "?" + params + location.hash);
      }
      return;
    }
    for (let node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    $$(".is-target").forEach((n) => n.classList.remove("is-target"));
    el.classList.add("is-target");
    el.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", revealTarget);
  if (location.hash) revealTarget();

  /* Status polling for document rows and the document page (the uploader has its own loop). */
  function paintSteps(root, status) {
    const current = STAGES.indexOf(status);
    $$(".stage-steps li", root).forEach((li) => {
      const i = STAGES.indexOf(li.dataset.stage);
      li.classList.toggle("done", current >= 0 && i < current || status === "ready" && i === current);
      li.classList.toggle("current", i === current && status !== "ready");
    });
  }

  function paintDocument(root, doc) {
    const pill = $("[data-status-pill]", root);
    if (pill) { pill.textContent = doc.status; pill.className = "status status-" + doc.status; }
    const bar = $(".progress-bar", root);
    // A queued document shows a sliver, so a finished upload never looks like an empty bar.
    if (bar) bar.style.width = (doc.status === "ready" ? 100 : Math.max(doc.progress, 3)) + "%";
    const progress = $('[role="progressbar"]', root);
    if (progress) progress.setAttribute("aria-valuenow", doc.progress);
    const stage = $("[data-stage-label]", root);
    if (stage) stage.textContent = doc.stage || doc.status;
    const pct = $("[data-progress-label]", root);
    if (pct) pct.textContent = doc.progress + "%";
    ["chunk_count", "episode_count", "fact_count"].forEach((field) => {
      const cell = $('[data-field="' + field + '"]', root);
      if (cell) cell.textContent = doc[field];
    });
    paintSteps(root, doc.status);
  }

  const watched = $$("[data-doc-id][data-active]").filter((el) => !el.closest("#uploader"));
  if (watched.length) {
    const statusUrl = "/documents/status.json";
    const tick = async () => {
      const live = watched.filter((el) => el.hasAttribute("data-active"));
      if (!live.length) return;
      try {
        const ids = live.map((el) => el.dataset.docId).join(",");
        const response = await fetch(statusUrl + "?ids=" + ids, { headers: { Accept: "application/json" } });
        if (response.ok) {
          const byId = Object.fromEntries((await response.json()).documents.map((d) => [String(d.id), d]));
          live.forEach((el) => {
            const doc = byId[el.dataset.docId];
            if (!doc) return;
            paintDocument(el, doc);
            if (doc.finished) {
              el.removeAttribute("data-active");
              const thin = $(".progress-thin", el);
              if (thin) thin.remove();
              if (el.hasAttribute("data-reload-on-finish")) location.reload();
            }
          });
        }
      } catch (err) { /* offline for a moment: try again on the next tick */ }
      setTimeout(tick, POLL_MS);
    };
    setTimeout(tick, POLL_MS);
  }

  /* Search: a visible loading state, and one switch for every "why" panel. */
  const searchForm = $("[data-loading-form]");
  if (searchForm) {
    searchForm.addEventListener("submit", () => {
      const results = $("#search-results");
      if (results) results.classList.add("is-loading");
      $$("button[type=submit]", searchForm).forEach((b) => { b.disabled = true; b.textContent = "Searching…"; });
    });
    // The back button restores the page from cache with the loading state still on.
    window.addEventListener("pageshow", () => {
      const results = $("#search-results");
      if (results) results.classList.remove("is-loading");
      $$("button[type=submit]", searchForm).forEach((b) => { b.disabled = false; b.textContent = "Search"; });
    });
  }
  const whyAll = $("[data-why-all]");
  if (whyAll) {
    whyAll.addEventListener("click", () => {
      const open = whyAll.getAttribute("aria-pressed") !== "true";
      $$("details[data-why]").forEach((d) => { d.open = open; });
      whyAll.setAttribute("aria-pressed", String(open));
      whyAll.textContent = open ? "Hide why" : "Show why for all";
    });
  }

  const uploader = $("#uploader");
  if (uploader) setupUploader(uploader);

  /* The uploader: one request per file to the REST API, then live stage progress by polling. */
  function setupUploader(root) {
    const api = root.dataset.api;
    const statusUrl = root.dataset.statusUrl;
    const tenant = root.dataset.tenant;
    const maxBytes = Number(root.dataset.maxBytes);
    const list = $("#upload-list");
    const template = $("#upload-item-template");
    const summary = $("#upload-summary");
    const kbSelect = $("#upload-kb");
    const items = [];
    const polling = new Map(); // document id -> item
    const CONCURRENT_UPLOADS = 2;
    let uploading = 0;

    const headers = () => ({ "X-CSRFToken": csrfToken(), "X-Loci-Tenant": tenant, Accept: "application/json" });

    function setState(item, state, note) {
      item.state = state;
      item.el.dataset.state = state;
      const pill = $("[data-status-pill]", item.el);
      const labels = { pending: "waiting", uploading: "uploading", error: "error", duplicate: "duplicate" };
      if (labels[state]) { pill.textContent = labels[state]; pill.className = "status status-" + state; }
      const noteEl = $(".upload-note", item.el);
      noteEl.hidden = !note;
      noteEl.textContent = note || "";
      // A failure in the file itself (retryable: false) fails the same way again: no Retry for it.
      const pointless = state === "failed" && item.doc && item.doc.retryable === false;
      $("[data-retry]", item.el).hidden = pointless || !(state === "failed" || state === "error");
      renderSummary();
    }

    function setBar(item, pct) {
      $(".progress-bar", item.el).style.width = pct + "%";
      $('[role="progressbar"]', item.el).setAttribute("aria-valuenow", Math.round(pct));
    }

    function applyDocument(item, doc) {
      item.doc = doc;
      paintDocument(item.el, doc);
      const open = $("[data-open]", item.el);
      open.href = doc.url || "/documents/" + doc.id + "/";
      open.hidden = false;
      if (ACTIVE.includes(doc.status)) {
        setState(item, "working");
        polling.set(String(doc.id), item);
      } else if (doc.status === "ready") {
        polling.delete(String(doc.id));
        setState(item, "ready", [plural(doc.chunk_count, "chunk"), plural(doc.episode_count, "episode"),
          plural(doc.fact_count, "fact")].join(" · "));
      } else if (doc.status === "failed") {
        polling.delete(String(doc.id));
        setState(item, "failed", doc.error || "Processing failed.");
      }
    }

    function addFiles(files, kb) {
      const accepted = files.filter((f) => !f.name.startsWith("."));
      accepted.forEach((file) => {
        const el = template.content.firstElementChild.cloneNode(true);
        const name = file.webkitRelativePath || file.relativePath || file.name;
        $(".file-name", el).textContent = name;
        $(".file-name", el).title = name;
        $(".file-size", el).textContent = fmtBytes(file.size);
        const dot = file.name.lastIndexOf(".");
        $(".file-ext", el).textContent = dot > 0 ? file.name.slice(dot + 1, dot + 6) : "file";
        const item = { file, el, kb, state: "pending" };
        $("[data-retry]", el).addEventListener("click", () => retry(item));
        list.appendChild(el);
        items.push(item);
        if (file.size > maxBytes) {
          setState(item, "error", "Larger than the " + fmtBytes(maxBytes) + " limit; not uploaded.");
          $("[data-retry]", el).hidden = true;
        } else {
          setState(item, "pending");
        }
      });
      $("#upload-empty").hidden = items.length > 0;
      pump();
    }

    function pump() {
      while (uploading < CONCURRENT_UPLOADS) {
        const next = items.find((i) => i.state === "pending");
        if (!next) return;
        upload(next);
      }
    }

    function upload(item) {
      uploading++;
      setState(item, "uploading");
      setBar(item, 0);
      const form = new FormData();
      form.append("kb", item.kb);
      form.append("files", item.file, item.file.name);
      // XMLHttpRequest rather than fetch: it reports upload progress for the bar.
      const xhr = new XMLHttpRequest();
      xhr.open("POST", api);
      Object.entries(headers()).forEach(([k, v]) => xhr.setRequestHeader(k, v));
      xhr.upload.onprogress = (e) => {
        if (!e.lengthComputable) return;
        const pct = (e.loaded / e.total) * 100;
        setBar(item, pct);
        $("[data-status-pill]", item.el).textContent = "uploading " + Math.round(pct) + "%";
      };
      xhr.onload = () => {
        uploading--;
        let body = null;
        try { body = JSON.parse(xhr.responseText); } catch (err) { /* not JSON: reported below */ }
        if ((xhr.status === 200 || xhr.status === 201) && Array.isArray(body) && body.length) {
          const result = body[0];
          if (result.duplicate) {
            item.doc = result.document;
            setBar(item, 100);
            paintSteps(item.el, result.document.status);
            const open = $("[data-open]", item.el);
            open.href = "/documents/" + result.document.id + "/";
            open.hidden = false;
            setState(item, "duplicate", "Already in this knowledge base as “" + result.document.filename
              + "” (" + result.document.status + ") — not ingested again.");
          } else {
            applyDocument(item, { ...result.document, url: "/documents/" + result.document.id + "/" });
          }
        } else {
          setState(item, "error", errorMessage(xhr.status, body));
        }
        pump();
      };
      xhr.onerror = () => {
        uploading--;
        setState(item, "error", "The upload did not reach the server. Check the connection and retry.");
        pump();
      };
      xhr.send(form);
    }

    function errorMessage(status, body) {
      if (body && typeof body.error === "string") return body.error;
      if (body && typeof body === "object") {
        const first = Object.values(body).flat()[0];
        if (typeof first === "string") return first;
      }
      if (status === 403) return "Your role may not upload into this tenant.";
      if (status === 413) return "The file is too large for the server.";
      return "The upload failed (HTTP " + status + ").";
    }

    async function retry(item) {
      if (item.state === "error") { setState(item, "pending"); pump(); return; }
      // A failed document: process it again from the start (the REST API's re-run action).
      const button = $("[data-retry]", item.el);
      button.disabled = true;
      try {
        const response = await fetch(api + "/" + item.doc.id + "/rerun", { method: "POST", headers: headers() });
        const body = await response.json().catch(() => null);
        if (response.ok) applyDocument(item, { ...body, url: "/documents/" + body.id + "/" });
        else setState(item, "failed", errorMessage(response.status, body));
      } catch (err) {
        setState(item, "failed", "Could not reach the server to retry.");
      } finally {
        button.disabled = false;
      }
    }

    async function poll() {
      if (polling.size) {
        try {
          const response = await fetch(statusUrl + "?ids=" + Array.from(polling.keys()).join(","),
            { headers: { Accept: "application/json" } });
          if (response.ok) {
            (await response.json()).documents.forEach((doc) => {
              const item = polling.get(String(doc.id));
              if (item) applyDocument(item, doc);
            });
          }
        } catch (err) { /* try again on the next tick */ }
      }
      setTimeout(poll, POLL_MS);
    }
    setTimeout(poll, POLL_MS);

    function renderSummary() {
      if (!items.length) { summary.hidden = true; return; }
      const count = (states) => items.filter((i) => states.includes(i.state)).length;
      const parts = [items.length + " file" + (items.length === 1 ? "" : "s")];
      const ready = count(["ready"]), busy = count(["pending", "uploading", "working"]);
      const failed = count(["failed", "error"]), dup = count(["duplicate"]);
      if (ready) parts.push(ready + " ready");
      if (busy) parts.push(busy + " in progress");
      if (failed) parts.push(failed + " failed");
      if (dup) parts.push(dup + " duplicate" + (dup === 1 ? "" : "s"));
      summary.textContent = parts.join(" · ");
      summary.hidden = false;
    }

    // Picking and dropping.
    const zone = $("#dropzone");
    const pickFiles = $("#pick-files");
    const pickFolder = $("#pick-folder");
    [pickFiles, pickFolder].forEach((input) => {
      input.addEventListener("change", () => {
        addFiles(Array.from(input.files), kbSelect.value);
        input.value = "";
      });
    });
    zone.addEventListener("click", (e) => { if (!e.target.closest("label")) pickFiles.click(); });
    zone.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pickFiles.click(); }
    });
    ["dragenter", "dragover"].forEach((type) => zone.addEventListener(type, (e) => {
      e.preventDefault();
      zone.classList.add("is-over");
    }));
    ["dragleave", "drop"].forEach((type) => zone.addEventListener(type, () => zone.classList.remove("is-over")));
    zone.addEventListener("drop", async (e) => {
      e.preventDefault();
      const kb = kbSelect.value;
      // Entries must be taken synchronously: the DataTransfer is emptied once the handler yields.
      const entries = Array.from(e.dataTransfer.items || [])
        .map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null)).filter(Boolean);
      if (!entries.length) { addFiles(Array.from(e.dataTransfer.files), kb); return; }
      const files = [];
      for (const entry of entries) await collect(entry, files);
      addFiles(files, kb);
    });

    async function collect(entry, out) {
      if (entry.isFile) {
        const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
        file.relativePath = entry.fullPath.replace(/^\//, "");
        out.push(file);
      } else if (entry.isDirectory) {
        const reader = entry.createReader();
        let batch;
        do {
          batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
          for (const child of batch) await collect(child, out);
        } while (batch.length);
      }
    }

    window.addEventListener("beforeunload", (e) => {
      if (items.some((i) => i.state === "uploading" || i.state === "pending")) { e.preventDefault(); e.returnValue = ""; }
    });
  }
})();
