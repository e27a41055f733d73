// The memory console (RFC 10.8). Loaded from the server: the page runs no inline script.
// Keys, ignored while typing in a field and with Ctrl, Alt or Meta held:
// "/" moves the focus to the search box, as in most consoles; on the review page (RFC 5.7)
// "j" and "k" select the next and previous proposal, and "a", "r" and "e" open the selected
// one's approve, reject and amend form with the focus in its first field.
const DECISION_KEYS = { a: "approve", r: "reject", e: "amend" };

function proposals() {
  return Array.from(document.querySelectorAll("article[data-proposal]"));
}

function selected() {
  return document.querySelector("article[data-proposal].selected");
}

function select(entry) {
  for (const other of proposals()) {
    other.classList.remove("selected");
    other.removeAttribute("aria-current");
  }
  entry.classList.add("selected");
  entry.setAttribute("aria-current", "true");
}

function move(step) {
  const all = proposals();
  if (all.length === 0) {
    return false;
  }
  const at = all.indexOf(selected());
  const next = at === -1 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(at + step, 0), all.length - 1);
  select(all[next]);
  all[next].focus();
  all[next].scrollIntoView({ block: "nearest" });
  return true;
}

function openDecision(name) {
  const entry = selected();
  const details = entry && entry.querySelector(`details[data-decision="${name}"]`);
  if (!details) {
    return false;
  }
  for (const other of entry.querySelectorAll("details[data-decision]")) {
    other.open = other === details;
  }
  const first = details.querySelector("form input:not([type=hidden]), form select, form textarea, form button");
  (first || details.querySelector("summary")).focus();
  return true;
}

document.addEventListener("keydown", (event) => {
  const target = event.target;
  const typing = target instanceof HTMLElement && target.closest("input, textarea, select, [contenteditable]");
  if (typing || event.ctrlKey || event.metaKey || event.altKey) {
    return;
  }
  let handled = false;
  if (event.key === "/") {
    const search = document.getElementById("q");
    if (search) {
      search.focus();
      handled = true;
    }
  } else if (event.key === "j" || event.key === "k") {
    handled = move(event.key === "j" ? 1 : -1);
  } else if (Object.hasOwn(DECISION_KEYS, event.key)) {
    handled = openDecision(DECISION_KEYS[event.key]);
  }
  if (handled) {
    event.preventDefault();
  }
});

// A proposal reached with Tab or a click becomes the selected one, so the keys act on it.
document.addEventListener("focusin", (event) => {
  const entry = event.target instanceof Element && event.target.closest("article[data-proposal]");
  if (entry && !entry.classList.contains("selected")) {
    select(entry);
  }
});
