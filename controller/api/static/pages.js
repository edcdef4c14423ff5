// mpijob-controller pages: live phases, log follow and filtering. Hand-written, no library.
// Everything here improves a page that already reads without it.
"use strict";

// A call that, ms later, fetches this page afresh and hands the parsed page to use; calls made
// meanwhile are that one.
function freshPageLater(ms, use) {
  let pending = null;
  return () => {
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      const answer = await fetch(location.href, { credentials: "same-origin" });
      if (!answer.ok) return;
      use(new DOMParser().parseFromString(await answer.text(), "text/html"));
    }, ms);
  };
}

// The job list: the same query as the page, asked of the JSON route every 5 s; phases updated in place.
function liveList(table) {
  const refresh = async () => {
    try {
      const answer = await fetch(table.dataset.api, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!answer.ok) return;
      const page = await answer.json();
      for (const run of page.items) {
        const cell = table.querySelector(`tr[data-uid="${CSS.escape(run.uid)}"] [data-phase]`);
        if (cell && cell.textContent !== run.phase) {
          cell.textContent = run.phase;
          cell.className = `phase phase-${run.phase.toLowerCase()}`;
          if (run.phase === "Failed") refreshReasons();
        }
      }
    } catch (err) { /* offline for a moment: the next round tries again */ }
  };
  // a run that just failed gets its sentence from the server-rendered page
  const refreshReasons = freshPageLater(500, (fresh) => {
    for (const row of fresh.querySelectorAll("#runs tr[data-uid]")) {
      const mine = table.querySelector(`tr[data-uid="${CSS.escape(row.dataset.uid)}"] .why`);
      if (mine) mine.textContent = row.querySelector(".why").textContent;
    }
  });
  setInterval(refresh, 5000);
}

// A run's page: its event stream says when something changed; the live parts are fetched anew.
function liveRun(root) {
  const swap = freshPageLater(200, (fresh) => {
    for (const part of document.querySelectorAll("[data-live][id]")) {
      const next = fresh.getElementById(part.id);
      if (next) part.replaceWith(next);
    }
  });
  const stream = new EventSource(root.dataset.events);
  for (const kind of ["phase", "finding", "end", "deleted"]) stream.addEventListener(kind, swap);
  stream.addEventListener("end", () => stream.close());
  stream.addEventListener("denied", () => stream.close());
}

// The Logs tab: follow new lines (the logs route's stream) and narrow the shown lines as one types.
function logs(list) {
  const follow = document.getElementById("follow");
  const box = document.getElementById("q");
  let stream = null;
  const matches = (li) => !box.value || li.textContent.toLowerCase().includes(box.value.toLowerCase());
  follow.addEventListener("change", () => {
    if (!follow.checked) { if (stream) stream.close(); stream = null; return; }
    stream = new EventSource(follow.dataset.follow);
    stream.addEventListener("line", (message) => {
      const line = JSON.parse(message.data);
      const li = document.createElement("li");
      const at = document.createElement("span"); at.className = "at"; at.textContent = line.at.slice(11, 23);
      const who = document.createElement("span"); who.className = "src-pod";
      who.textContent = ` ${line.pod}${line.rank === null ? "" : ` rank ${line.rank}`} `;
      const text = document.createElement("span"); text.className = "text"; text.textContent = line.text;
      li.append(at, who, text);
      li.hidden = !matches(li);
      const none = list.querySelector("li.none"); if (none) none.remove();
      list.append(li);
      li.scrollIntoView({ block: "nearest" });
    });
    stream.addEventListener("denied", () => { follow.checked = false; stream.close(); });
  });
  box.addEventListener("input", () => { for (const li of list.children) li.hidden = !matches(li); });
}

document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("runs");
  if (table) liveList(table);
  const run = document.getElementById("run");
  if (run) liveRun(run);
  const list = document.getElementById("log");
  if (list && document.getElementById("follow")) logs(list);
});
