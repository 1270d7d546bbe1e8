// kiln report: a table of contents and search, run once the page is loaded (no downloads).
(function () {
  "use strict";
  var toc = document.getElementById("toc");
  var sections = document.querySelectorAll("main > section[id]");
  sections.forEach(function (section) {
    var heading = section.querySelector("h2");
    var link = document.createElement("a");
    link.href = "#" + section.id;
    link.className = "toc-link";
    var count = section.querySelectorAll("article").length;
    link.textContent = heading ? heading.textContent + (count ? " (" + count + ")" : "") : section.id;
    toc.appendChild(link);
  });

  var items = Array.prototype.slice.call(document.querySelectorAll("[data-search]"));
  var input = document.getElementById("search");
  var counter = document.getElementById("search-count");
  function search() {
    var query = input.value.trim().toLowerCase();
    var shown = 0;
    items.forEach(function (item) {
      var hit = !query || item.textContent.toLowerCase().indexOf(query) >= 0;
      item.classList.toggle("hidden-by-search", !hit);
      if (hit) {
        shown += 1;
        if (query) {
          item.querySelectorAll("details").forEach(function (d) {
            if (d.textContent.toLowerCase().indexOf(query) >= 0) { d.open = true; }
          });
        }
      }
    });
    counter.textContent = query ? shown + " of " + items.length + " match" : "";
  }
  input.addEventListener("input", search);
  if (window.location.hash.indexOf("#search=") === 0) {
    input.value = decodeURIComponent(window.location.hash.slice(8));
  }
  search();
  document.body.setAttribute("data-ready", "1");
})();
