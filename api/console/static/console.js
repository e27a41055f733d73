// The memory console (RFC 10.8). Loaded from the server: the page runs no inline script.
// "/" moves the focus to the search box, as in most consoles; nothing else lives here.
document.addEventListener("keydown", (event) => {
  const target = event.target;
  const typing = target instanceof HTMLElement && target.closest("input, textarea, select, [contenteditable]");
  if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
    const search = document.getElementById("q");
    if (search) {
      event.preventDefault();
      search.focus();
    }
  }
});
