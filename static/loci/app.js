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

  /* The documents table: one box ticks every document of the page. */
  $$("[data-pick-all]").forEach((all) => {
    const boxes = () => $$('input[name="ids"]');
    all.addEventListener("change", () => boxes().forEach((box) => { box.checked = all.checked; }));
    boxes().forEach((box) => box.addEventListener("change", () => {
      all.checked = boxes().every((b) => b.checked);
    }));
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
    const label = doc.phase === "queued" ? "queued" : doc.status;
    if (pill) { pill.textContent = label; pill.className = "status status-" + label; }
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

  $$("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const source = $(button.dataset.copy);
      try { await navigator.clipboard.writeText(source.textContent); button.textContent = "Copied"; }
      catch (err) { window.getSelection().selectAllChildren(source); button.textContent = "Press Ctrl+C"; }
    });
  });

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

    const STATE_LABELS = { pending: "waiting", uploading: "uploading", error: "error", duplicate: "duplicate",
      queued: "queued", ready: "ready", failed: "failed", cancelled: "cancelled" };

    function setState(item, state, note) {
      item.state = state;
      item.el.dataset.state = state;
      const pill = $("[data-status-pill]", item.el);
      if (STATE_LABELS[state]) { pill.textContent = STATE_LABELS[state]; pill.className = "status status-" + state; }
      $(".upload-note", item.el).textContent = note || "";
      // A failure in the file itself (retryable: false) fails the same way again: no Retry for it.
      const pointless = state === "failed" && item.doc && item.doc.retryable === false;
      $("[data-retry]", item.el).hidden = pointless || !["failed", "cancelled", "error"].includes(state);
      $("[data-cancel]", item.el).hidden = !(item.doc && ["queued", "working"].includes(state));
      renderSummary();
    }

    function setBar(item, pct) {
      $(".progress-bar", item.el).style.width = pct + "%";
      $('[role="progressbar"]', item.el).setAttribute("aria-valuenow", Math.round(pct));
    }

    function fmtSeconds(s) {
      if (s === null || s === undefined) return "";
      if (s < 1) return "under 1 s";
      s = Math.round(s);
      if (s < 60) return s + " s";
      const m = Math.floor(s / 60);
      return m < 60 ? m + " min " + (s % 60) + " s" : Math.floor(m / 60) + " h " + (m % 60) + " min";
    }

    /* An estimate only from the installation's measured stage speeds (estimate_seconds is null without them). */
    function estimateText(doc, suffix) {
      const s = doc.estimate_seconds;
      if (s === null || s === undefined) return "";
      if (s <= 0) return "over its measured time";
      return "about " + (s < 60 ? Math.max(1, Math.round(s)) + " s" : Math.round(s / 60) + " min") + suffix;
    }

    /* Time column: what the document is actually doing, measured by the server, never a guess. */
    function timeText(doc) {
      switch (doc.phase) {
        case "queued": return ["waiting " + fmtSeconds(doc.waiting_seconds ?? doc.waited_seconds), estimateText(doc, " of work")]
          .filter(Boolean).join(" · ");
        // A stage that has just claimed the document may not have written its start yet: it has run under 1 s.
        case "working": return ["running " + fmtSeconds(doc.took_seconds ?? 0), estimateText(doc, " left")].filter(Boolean).join(" · ");
        case "ready": return "took " + fmtSeconds(doc.took_seconds);
        default:
          if (!doc.started) return "stopped before any stage started";
          return (doc.phase === "cancelled" ? "cancelled after " : "failed after ") + fmtSeconds(doc.took_seconds);
      }
    }

    function applyDocument(item, doc) {
      item.doc = doc;
      const open = $("[data-open]", item.el);
      open.href = doc.url || "/documents/" + doc.id + "/";
      open.hidden = false;
      if (doc.detected_type) {
        const type = $(".file-ext", item.el);
        type.textContent = doc.detected_type;
        type.classList.remove("muted");
        type.title = "detected from the content";
      }
      $("[data-time]", item.el).textContent = timeText(doc);
      const detail = $("[data-stage-detail]", item.el);
      const pill = $("[data-status-pill]", item.el);
      if (doc.phase === "queued" || doc.phase === "working") polling.set(String(doc.id), item);
      else polling.delete(String(doc.id));
      if (doc.phase === "queued") {
        // Waiting for a worker, before the first stage or between two: no stage is running, so none is named.
        setState(item, "queued");
        const ahead = doc.queue_ahead === null || doc.queue_ahead === undefined ? ""
          : doc.queue_ahead === 0 ? "next in line" : doc.queue_ahead + " ahead";
        detail.textContent = [doc.started && doc.waiting_for ? "for " + doc.waiting_for : "", ahead].filter(Boolean).join(" · ");
        setBar(item, doc.progress);
        $(".progress", item.el).classList.add("is-waiting");
      } else if (doc.phase === "working") {
        setState(item, "working");
        pill.textContent = doc.status;
        pill.className = "status status-" + doc.status;
        detail.textContent = doc.stage && doc.stage !== doc.status ? doc.stage : "";
        setBar(item, doc.progress);
        $(".progress", item.el).classList.remove("is-waiting");
      } else {
        detail.textContent = "";
        $(".progress", item.el).classList.remove("is-waiting");
        if (doc.phase === "ready") {
          setBar(item, 100);
          setState(item, "ready", [plural(doc.chunk_count, "chunk"), plural(doc.episode_count, "episode"),
            plural(doc.fact_count, "fact")].join(" · "));
        } else {
          setBar(item, 0);
          setState(item, doc.phase === "cancelled" ? "cancelled" : "failed", doc.error || "Processing failed.");
        }
      }
    }

    /* The server's status for these documents, asked in batches (the endpoint takes 200 ids at a time). */
    async function refresh(ids) {
      for (let i = 0; i < ids.length; i += 200) {
        const response = await fetch(statusUrl + "?ids=" + ids.slice(i, i + 200).join(","),
          { headers: { Accept: "application/json" } });
        if (!response.ok) continue;
        (await response.json()).documents.forEach((doc) => {
          const item = items.find((it) => it.doc && String(it.doc.id) === String(doc.id));
          if (item) applyDocument(item, doc);
        });
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
        const ext = $(".file-ext", el);
        ext.textContent = dot > 0 ? file.name.slice(dot + 1, dot + 6).toLowerCase() : "—";
        ext.classList.add("muted");
        ext.title = "from the file name; the type is detected from the content once parsing starts";
        const item = { file, el, kb, state: "pending" };
        $("[data-retry]", el).addEventListener("click", () => retry(item));
        $("[data-cancel]", el).addEventListener("click", () => cancel(item));
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
      $("#upload-table").hidden = items.length === 0;
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
            const open = $("[data-open]", item.el);
            open.href = "/documents/" + result.document.id + "/";
            open.hidden = false;
            setState(item, "duplicate", "Already in this knowledge base as “" + result.document.filename
              + "” (" + result.document.status + ") — not ingested again.");
          } else {
            // Uploaded: the bar now measures processing, which starts at 0 as "queued" (never "2 %" of a stage).
            item.doc = result.document;
            applyDocument(item, { ...result.document, phase: "queued", started: false, queue_ahead: null,
              waited_seconds: 0, url: "/documents/" + result.document.id + "/" });
            refresh([result.document.id]).catch(() => {});
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

    async function documentAction(item, verb, failure) {
      const button = $(verb === "rerun" ? "[data-retry]" : "[data-cancel]", item.el);
      button.disabled = true;
      try {
        const response = await fetch(api + "/" + item.doc.id + "/" + verb, { method: "POST", headers: headers() });
        const body = await response.json().catch(() => null);
        if (response.ok) await refresh([item.doc.id]);
        else $(".upload-note", item.el).textContent = errorMessage(response.status, body);
      } catch (err) {
        $(".upload-note", item.el).textContent = failure;
      } finally {
        button.disabled = false;
      }
    }

    function retry(item) {
      if (item.state === "error") { setState(item, "pending"); pump(); return; }
      // A failed or cancelled document: process it again from the start (the REST API's re-run action).
      documentAction(item, "rerun", "Could not reach the server to retry.");
    }

    function cancel(item) { documentAction(item, "cancel", "Could not reach the server to cancel."); }

    async function poll() {
      if (polling.size) {
        try { await refresh(Array.from(polling.keys())); } catch (err) { /* try again on the next tick */ }
      }
      setTimeout(poll, POLL_MS);
    }
    setTimeout(poll, POLL_MS);

    function renderSummary() {
      $("#upload-bar").hidden = !items.length;
      if (!items.length) return;
      const count = (states) => items.filter((i) => states.includes(i.state)).length;
      const parts = [plural(items.length, "file")];
      const uploading = count(["pending", "uploading"]);
      [[uploading, "uploading"], [count(["queued"]), "queued"], [count(["working"]), "working"],
        [count(["ready"]), "ready"], [count(["failed", "error"]), "failed"], [count(["cancelled"]), "cancelled"]]
        .forEach(([n, word]) => { if (n) parts.push(n + " " + word); });
      const dup = count(["duplicate"]);
      if (dup) parts.push(dup + " duplicate" + (dup === 1 ? "" : "s"));
      summary.textContent = parts.join(" · ");
    }

    // button[…]: the table carries data-filter too (the CSS hides rows by it), and must not get aria-pressed.
    $$("button[data-filter]", root).forEach((button) => {
      button.addEventListener("click", () => {
        $$("button[data-filter]", root).forEach((b) => b.setAttribute("aria-pressed", String(b === button)));
        $("#upload-table").dataset.filter = button.dataset.filter;
      });
    });

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
    // A click anywhere on the zone picks files (a mouse convenience); the keyboard reaches the two
    // file inputs behind "choose files" / "choose a folder", so the zone itself is not a control
    // (a control around other controls is what screen readers cannot announce, axe nested-interactive).
    zone.addEventListener("click", (e) => { if (!e.target.closest("label, input")) pickFiles.click(); });
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
