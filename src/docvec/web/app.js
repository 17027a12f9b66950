"use strict";
// The search page. A server that asks for a key is signed in to once (POST /session): the server answers
// with a session cookie this script cannot read (HttpOnly), which the browser sends with every request of
// this page, images and files included. The page keeps no key.
const $ = (id) => document.getElementById(id);
let documents = [];
// the server's reranker (GET /healthz): none, and the switch stays hidden and searches say nothing of it
let reranker = null;
let rerankDefault = 0;  // the server's DOCVEC_RERANK: how deep a reranked search goes (10 when unset)
let signedIn = false;

// What each mode scores pages by, and what its score is: a number to compare within one search, never a
// probability (the reranker's is one). The fused modes' are Qdrant's weighted RRF with k = 2 (docs/text.md).
const MODES = {
  dense: "the page's look",
  multi: "the page's look, token by token",
  hybrid: "the page's look, its best pages then token by token",
  text: "the words of the page's text",
};
// [what the score is, what it says in short, and in full (the score's tooltip)]
const SCORES = {
  dense: ["cosine", "from -1 to 1", "the cosine of the query's and the page's vectors, from -1 to 1"],
  multi: ["MaxSim", "grows with the query's length",
          "each query token's best match on the page, summed: it grows with the query's length"],
  hybrid: ["MaxSim", "grows with the query's length",
           "each query token's best match on the page, summed: it grows with the query's length"],
  text: ["BM25", "0 and up, rare words count most", "how well the page's words match the query's, from 0 up"],
  fused: ["rank fusion", "1/(1 + place) in each ranking, summed: 0.5 is first in one ranking, 1 first in both",
          "1/(1 + the page's place) in each ranking (1 for the best), summed; in the keyword ranking the " +
          "place is divided by DOCVEC_TEXT_WEIGHT (1 by default): 0.5 is first in one ranking, 1 first in both"],
};
function modeText(mode) {
  const [visual, fused] = mode.split("+");
  if (!MODES[visual]) return mode;
  return fused ? "the page's look and its text's words, ranked apart and fused" : MODES[visual];
}
function scoreOf(mode) {
  return SCORES[mode.includes("+") ? "fused" : mode] || ["score", "higher is closer", "higher is closer"];
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function needKey() {
  $("signin").hidden = false; $("key").focus();
  setStatus("This server needs an API key: enter it to sign in.", true);
}

async function call(method, url, body) {
  const r = await fetch(url, {method, headers: body === undefined ? {} : {"Content-Type": "application/json"},
                              body: body === undefined ? undefined : JSON.stringify(body)});
  const data = r.status === 204 ? {} : await r.json().catch(() => ({}));
  if (r.status === 401) { needKey(); throw new Error("API key"); }
  if (!r.ok) throw new Error(data.detail || ("Error " + r.status));
  return data;
}

async function signIn(ev) {
  ev.preventDefault();
  const key = $("key").value;
  $("key").value = "";  // not kept: the session cookie stands for it
  try { await call("POST", "session", {key}); }
  catch (e) { setStatus(e.message, true); $("key").focus(); return; }
  $("signin").hidden = true;
  await loadSession();
  setStatus("Signed in.");
  await Promise.all([loadHealth(), loadDocuments()]);
  if ($("q").value.trim()) $("search").requestSubmit();
}

async function signOut() {
  try { await call("DELETE", "session"); } catch (e) { /* the cookie is gone either way */ }
  location.reload();
}

async function loadSession() {
  try {
    const s = await call("GET", "session");
    signedIn = s.key_required && s.reader;
  } catch (e) { signedIn = false; }
  $("signout").hidden = !signedIn;
}

// "1 page", "2 pages": one way of counting, everywhere on the page
function pages(n) {
  return n + (n === 1 ? " page" : " pages");
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// The snippet's text with the query's terms in <mark>: built from text nodes (never innerHTML), so a page's
// text cannot inject markup.
function snippetEl(snippet) {
  const box = el("div", "snippet");
  let at = 0;
  for (const [start, end] of snippet.marks) {
    if (start > at) box.append(snippet.text.slice(at, start));
    box.append(el("mark", "", snippet.text.slice(start, end)));
    at = end;
  }
  if (at < snippet.text.length) box.append(snippet.text.slice(at));
  return box;
}
function tagText(tags) {
  return Object.entries(tags || {}).map(([k, v]) => k + "=" + v).join(", ");
}

function showHint() {
  const grid = $("results");
  grid.replaceChildren();
  const hint = el("div", "hint");
  if (!documents.length) {
    hint.append("Nothing is indexed yet. Drop PDFs or images on the panel on the right, or run ",
                el("code", "", "docvec ingest PATH"), " on the server, then search here.");
  } else {
    hint.append(documents.length + " documents are indexed. Type what you are looking for, in words: " +
                "the pages that match best come first.");
  }
  grid.append(hint);
}

// -- the server -------------------------------------------------------------------------------------------

async function loadHealth() {
  let health;
  try { health = await call("GET", "healthz"); } catch (e) { return; }
  reranker = health.reranker || null;
  rerankDefault = health.rerank || 0;
  $("rerank-switch").hidden = !reranker;
  $("rerank").checked = rerankDefault > 0;
  if (reranker) $("rerank-switch").title += " (" + reranker + ")";
  showModes(health);
  showNotices(health);
}

// The modes this collection can answer: the visual ones its vectors allow, and with text the keyword and
// fused ones; "auto" names the one the server picks.
function showModes(health) {
  const select = $("mode");
  const chosen = select.value;
  const visual = health.multivector ? ["dense", "hybrid", "multi"] : ["dense"];
  const modes = health.text ? [...visual.map((v) => v + "+text"), ...visual, "text"] : visual;
  select.replaceChildren(new Option("auto" + (health.search_mode ? " (" + health.search_mode + ")" : ""), ""));
  for (const m of modes) {
    const option = new Option(m, m);
    option.title = modeText(m);
    select.append(option);
  }
  select.value = modes.includes(chosen) ? chosen : "";
}

// What a person searching should know before trusting the order of the pages.
function showNotices(health) {
  const box = $("notices");
  box.replaceChildren();
  if (health.test_model) {
    const p = el("p", "notice", "This server runs docvec's test model (" + health.model + "): its weights " +
                 "are random, so the order of the pages means nothing. Serve a real model to search by " +
                 "meaning: ");
    p.append(el("code", "", "docvec models list"), " names them.");
    p.id = "test-model";
    box.append(p);
  }
  if (health.text === false) {
    const p = el("p", "notice", "This collection keeps no page text: pages are found by their look only, " +
                 "with no keyword search and no snippets. ");
    p.append(el("code", "", "docvec reindex --text"), " adds it.");
    p.id = "no-text";
    box.append(p);
  }
}

// how many of the first stage's best pages the reranker reads: the server's default depth, at least k
function rerankDepth(k) {
  return $("rerank").checked ? Math.min(100, Math.max(rerankDefault || 10, k)) : 0;
}

// -- documents ----------------------------------------------------------------------------------------

async function loadDocuments() {
  let body;
  try { body = await call("GET", "documents?limit=1000"); } catch (e) { if (e.message !== "API key") setStatus(e.message, true); return; }
  documents = body.documents;
  const list = $("docs");
  list.replaceChildren();
  const select = $("doc");
  const chosen = select.value;
  select.replaceChildren(new Option("all", ""));
  for (const d of documents) {
    select.append(new Option(d.name, d.doc_id));
    const li = el("li");
    const info = el("div");
    const link = fileLink(d.name, "documents/" + d.doc_id + "/file");
    // a document still being written is not searchable yet: say so, with how far it got
    const count = d.state === "writing"
      ? "being indexed: " + (d.pages_written || 0) + " of " + pages(d.page_count)
      : (d.pages_indexed === d.page_count ? "" : d.pages_indexed + " of ") + pages(d.page_count);
    info.append(link, el("div", "meta", count + (tagText(d.tags) ? " · " + tagText(d.tags) : "")));
    const del = el("button", "quiet", "delete");
    del.title = "remove " + d.name + " from the index";
    del.addEventListener("click", () => removeDocument(d));
    li.append(info, del);
    list.append(li);
  }
  select.value = documents.some((d) => d.doc_id === chosen) ? chosen : "";
  if (!$("results").querySelector("figure")) showHint();
}

async function removeDocument(d) {
  if (!confirm("Remove " + d.name + " from the index?")) return;
  try {
    const r = await call("DELETE", "documents/" + d.doc_id);
    setStatus("Removed " + d.name + " (" + pages(r.pages_removed) + ").");
  } catch (e) { if (e.message !== "API key") setStatus(e.message, true); }
  await loadDocuments();
}

// A link to a document's file: the server serves it by the type its bytes have (a PDF, an image, or an
// attachment), and the page checks it is still there before it opens it in a tab of its own.
function fileLink(name, url) {
  const link = el("a", "name", name);
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  link.title = "open " + name;
  link.addEventListener("click", async (ev) => {
    ev.preventDefault();
    const r = await fetch(url, {method: "HEAD"}).catch(() => null);
    if (r && r.ok) window.open(url, "_blank", "noopener,noreferrer");
    else setStatus("The file cannot be opened: it is no longer as it was indexed.", true);
  });
  return link;
}

// -- uploads ------------------------------------------------------------------------------------------

function upload(file) {
  const row = el("div", "", file.name + ": uploading");
  const bar = el("progress");
  bar.max = 1; bar.value = 0;
  row.append(bar);
  $("uploads").append(row);
  const say = (text, isError) => { row.firstChild.textContent = file.name + ": " + text; if (isError) row.className = "error"; };
  const form = new FormData();
  form.append("file", file, file.name);
  const xhr = new XMLHttpRequest();
  xhr.open("POST", "documents");
  xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = e.loaded / e.total; };
  xhr.onerror = () => say("the server cannot be reached", true);
  xhr.onload = async () => {
    const body = JSON.parse(xhr.responseText || "{}");
    if (xhr.status === 401) { needKey(); say("needs the API key", true); return; }
    if (xhr.status === 202) { await follow(body, bar, say); return; }
    if (xhr.status !== 200) { bar.remove(); say(body.detail || ("error " + xhr.status), true); return; }
    done(body, bar, say);
  };
  xhr.send(form);
}

function done(result, bar, say) {
  bar.value = 1;
  say(result.already_indexed ? "already indexed as " + result.name : "indexed, " + pages(result.pages));
  loadDocuments();
}

async function follow(job, bar, say) {
  bar.value = 0;
  for (;;) {
    let now;
    try { now = await call("GET", job.status_url.replace(/^\//, "")); } catch (e) { say(e.message, true); return; }
    if (now.status === "done") { done(now.result, bar, say); return; }
    if (now.status === "failed") { bar.remove(); say(now.detail || "failed", true); return; }
    if (now.status === "cancelled") { bar.remove(); say("cancelled", true); return; }
    if (now.page_count) { bar.max = now.page_count; bar.value = now.page; }
    say(now.status === "queued" ? "waiting its turn" : "indexing page " + now.page + " of " + (now.page_count || "?"));
    await new Promise((r) => setTimeout(r, 700));
  }
}

const drop = $("drop");
drop.addEventListener("click", () => $("file").click());
drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") $("file").click(); });
$("file").addEventListener("change", (e) => { [...e.target.files].forEach(upload); e.target.value = ""; });
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault(); drop.classList.remove("over");
  [...e.dataTransfer.files].forEach(upload);
});

// -- search -------------------------------------------------------------------------------------------

async function runSearch(ev) {
  ev.preventDefault();
  const query = $("q").value.trim();
  if (!query) return;
  const k = Number($("k").value) || 12;
  const filter = {};
  if ($("doc").value) filter.doc_id = $("doc").value;
  const tag = $("tag").value.trim();
  if (tag) {
    const [key, ...rest] = tag.split("=");
    if (!key.trim() || !rest.join("=").trim()) { setStatus("A tag filter is key=value.", true); return; }
    filter.tags = {[key.trim()]: rest.join("=").trim()};
  }
  // the address bar holds the search, so a result page can be linked and reloaded
  const params = {q: query, k: String(k)};
  if (filter.doc_id) params.doc_id = filter.doc_id;
  if (tag) params.tag = tag;
  const request = {query, k, filter};
  if ($("mode").value) params.mode = request.mode = $("mode").value;
  if (reranker) params.rerank = String(request.rerank = rerankDepth(k));
  history.replaceState(null, "", "?" + new URLSearchParams(params));
  setStatus(request.rerank ? "Searching and reranking..." : "Searching...");
  let body;
  try { body = await call("POST", "search", request); }
  catch (e) { if (e.message !== "API key") setStatus(e.message === "Failed to fetch" ? "The server cannot be reached." : e.message, true); return; }
  const grid = $("results");
  grid.replaceChildren();
  $("scoring").hidden = true;
  if (!body.hits.length) { setStatus("Nothing found."); showHint(); return; }
  setStatus(pages(body.hits.length) + " · " + body.mode + (body.rerank ? ", reranked" : ""));
  const [measure, short, meaning] = scoreOf(body.mode);
  $("scoring").textContent = "Found by " + modeText(body.mode) + ". Score (" + measure + "): " + short +
    "; it orders this search's pages, and is no probability" +
    (body.rerank ? " (rerank, the reranker's, is one)." : ".");
  $("scoring").hidden = false;
  for (const hit of body.hits) {
    const fig = el("figure");
    const img = el("img");
    img.alt = hit.name + ", page " + hit.page;
    img.dataset.full = hit.image_url.replace(/^\//, "");
    const cap = el("figcaption");
    const name = fileLink(hit.name, hit.file_url.replace(/^\//, ""));
    const meta = el("div", "meta", "page " + hit.page + " · ");
    const score = el("span", "score", measure + " " + hit.score.toFixed(3));
    score.title = meaning;
    meta.append(score, " · ");
    if (hit.rerank_score != null) {
      const rerank = el("span", "rerank-score", "rerank " + hit.rerank_score.toFixed(3));
      rerank.title = "the reranker's probability that the page meets the query (score: the first stage's)";
      meta.append(rerank, " · ");
    }
    const page = el("a", "", "page image");
    page.href = "#";
    page.addEventListener("click", (e) => { e.preventDefault(); openPage(img.dataset.full); });
    meta.append(page);
    cap.append(name, meta);
    if (tagText(hit.tags)) cap.append(el("div", "tags", tagText(hit.tags)));
    if (hit.snippet) cap.append(snippetEl(hit.snippet));
    fig.append(img, cap);
    grid.append(fig);
    img.src = hit.thumbnail_url.replace(/^\//, "");
  }
}

function openPage(url) {
  const img = $("lightbox").querySelector("img");
  img.onerror = () => { $("lightbox").classList.remove("open"); setStatus("The page image cannot be loaded.", true); };
  img.src = url;
  $("lightbox").classList.add("open");
}

$("search").addEventListener("submit", runSearch);
$("signin").addEventListener("submit", signIn);
$("signout").addEventListener("click", signOut);
$("results").addEventListener("click", (ev) => { const img = ev.target.closest("figure img"); if (img) openPage(img.dataset.full); });
$("lightbox").addEventListener("click", () => $("lightbox").classList.remove("open"));
document.addEventListener("keydown", (e) => { if (e.key === "Escape") $("lightbox").classList.remove("open"); });

(async () => {
  await Promise.all([loadSession(), loadHealth(), loadDocuments()]);
  const given = new URLSearchParams(location.search);
  if (given.get("q")) {
    $("q").value = given.get("q");
    if (given.get("k")) $("k").value = given.get("k");
    if (given.get("doc_id")) $("doc").value = given.get("doc_id");
    if (given.get("tag")) $("tag").value = given.get("tag");
    const mode = given.get("mode");
    if (mode) {
      // a link's mode this collection cannot answer is sent all the same: the server says why
      if (![...$("mode").options].some((o) => o.value === mode)) $("mode").append(new Option(mode, mode));
      $("mode").value = mode;
    }
    if (given.get("rerank") !== null) $("rerank").checked = Number(given.get("rerank")) > 0;
    $("search").requestSubmit();
  } else {
    showHint();
  }
})();
