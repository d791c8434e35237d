// The course's summary in nbgrader's Validate dialog (`make lab` loads this file with
// --LabApp.extra_labextensions_path=jupyter/student/labextensions).
//
// Validate's server side puts the course's summary (coursekit/progress.py) first among the
// failing cells, because nbgrader's dialog shows nothing else: it comes as "The following cell
// failed:", the summary, and the error "(This is a summary, not a cell of your notebook.)".
// This plugin gives it a heading of its own instead, wraps its long lines to the dialog's
// width, and puts a heading above the failing test cells that follow. Without the plugin the
// dialog shows the same text in nbgrader's order. When every test cell passes, nbgrader's
// dialog says "Success! Your notebook passes all the tests."; the plugin adds under it what
// Validate did not run (the words of coursekit/progress.py's HIDDEN_CHECKS_NOTE).
//
// Written by hand in the shape JupyterLab loads a prebuilt extension in, like
// coursekit-start-page: it shares and imports no module, so it needs no build step.
(function () {
  "use strict";

  var MARK = "(This is a summary, not a cell of your notebook.)";
  var HIDDEN_CHECKS_NOTE = "Validate runs the test cells' visible examples only, here in your own server. The hidden checks (your code on other inputs) run only when the lesson is graded: on the class hub when you Submit it, otherwise when your instructor grades it.";

  function heading(text, first) {
    var element = document.createElement("h2");
    element.className = "coursekit-validate-heading";
    element.textContent = text;
    element.style.fontSize = "var(--jp-content-font-size3, 1.2em)";
    element.style.fontWeight = "bold";
    element.style.margin = first ? "0 0 0.4em 0" : "1em 0 0.4em 0";
    return element;
  }

  // #validation-message holds, for each failing cell: a label, the cell's source, its error.
  function arrange(message) {
    if (message.getAttribute("data-coursekit") === "arranged") {
      return;
    }
    message.setAttribute("data-coursekit", "arranged");
    var parts = Array.prototype.slice.call(message.children);
    var label = parts[0], summary = parts[1], mark = parts[2];
    if (!mark || mark.textContent.trim() !== MARK) {
      return;
    }
    message.replaceChild(heading("Summary", true), label);
    message.removeChild(mark);
    summary.classList.add("coursekit-validate-summary");
    var text = summary.querySelector("pre");
    if (text) {
      text.style.whiteSpace = "pre-wrap";
      text.style.overflowWrap = "anywhere";
    }
    if (summary.nextSibling) {
      message.insertBefore(heading("Failing test cells", false), summary.nextSibling);
    }
  }

  // nbgrader's success: the visible examples pass; the hidden checks did not run.
  function addNote(success) {
    if (success.querySelector(".coursekit-validate-note")) {
      return;
    }
    var note = document.createElement("p");
    note.className = "coursekit-validate-note";
    note.textContent = HIDDEN_CHECKS_NOTE;
    note.style.maxWidth = "60ch";
    success.appendChild(note);
  }

  function look(node) {
    if (node.nodeType !== 1) {
      return;
    }
    var message = node.id === "validation-message" ? node
      : node.querySelector("#validation-message");
    if (message) {
      arrange(message);
    }
    var success = node.classList.contains("validation-success") ? node
      : node.querySelector(".validation-success");
    if (success) {
      addNote(success);
    }
  }

  var plugin = {
    id: "coursekit-validate:summary",
    description: "Gives the course's summary in Validate's dialog a heading of its own.",
    autoStart: true,
    activate: function () {
      // JupyterLab attaches each dialog to <body>, its content already in it.
      new MutationObserver(function (changes) {
        changes.forEach(function (change) {
          Array.prototype.forEach.call(change.addedNodes, look);
        });
      }).observe(document.body, { childList: true });
    }
  };

  var container = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error("coursekit-validate has no module " + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: plugin };
      });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB["coursekit-validate"] = container;
})();
