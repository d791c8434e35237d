// The course's start page stays current in JupyterLab (`make lab` loads this file with
// --LabApp.extra_labextensions_path=jupyter/student/labextensions).
//
// After a lesson is saved, the server rewrites START-HERE.md with the student's progress (the
// post-save hook coursekit.lab.after_save). JupyterLab does not reload a document that changed
// on disk, so an open start page would go on showing the old progress. This plugin reloads it
// from disk whenever its tab is shown, and at once when a file is saved while it is open.
//
//
// On the class hub with feedback on submit, a second plugin shows each submission's state
// (received, how many are ahead, the result) beside it in the Assignments tab, from the
// student's server (GET coursekit/submissions, coursehub.startpage), and writes every time the
// hub gives ("2027-01-15 08:00:00 UTC") in the reader's own time zone, to the second, on the
// start page and in the Assignments tab. A third makes a link to a lesson the student has not
// fetched yet (a lesson's "Next: Lesson 04 →") say so, beside the link, instead of opening
// nothing.
//
// Written by hand in the shape JupyterLab loads a prebuilt extension in (a module federation
// container: `init` and `get`); it shares and imports no module, so it needs no build step. It
// only uses the application object that JupyterLab passes to every plugin.
(function () {
  "use strict";

  var START_PAGE = "START-HERE.md";

  function startPages(app) {
    var found = [];
    var widgets = app.shell.widgets("main");
    var next = widgets.next();
    // Lumino 2 returns an iterator ({value, done}).
    while (next && !next.done) {
      var widget = next.value;
      if (widget && widget.context && widget.context.path === START_PAGE) {
        found.push(widget);
      }
      next = widgets.next();
    }
    return found;
  }

  function reload(widget) {
    var context = widget && widget.context;
    if (!context || context.path !== START_PAGE || !context.isReady || context.model.dirty) {
      return;
    }
    context.revert().catch(function (error) {
      console.warn("coursekit: the start page was not reloaded", error);
    });
  }

  var plugin = {
    id: "coursekit-start-page:reload",
    description: "Reloads the course's start page when it is shown and after a save.",
    autoStart: true,
    activate: function (app) {
      app.shell.currentChanged.connect(function (shell, change) {
        reload(change.newValue);
      });
      app.serviceManager.contents.fileChanged.connect(function (contents, change) {
        var saved = change.type === "save" && change.newValue && change.newValue.path;
        if (saved && saved !== START_PAGE) {
          startPages(app).forEach(reload);
        }
      });
    }
  };

  var STAMP = /(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.\d+)? UTC/g;
  var STATE_CLASS = "coursekit-submission-state";

  function pad(number) {
    return (number < 10 ? "0" : "") + number;
  }

  // "2027-01-15 08:00:00 UTC" in this browser's time zone: "09:00:00 (your time)", with the
  // date when it is not today.
  function localTime(date, time) {
    var moment = new Date(date + "T" + time + "Z");
    if (isNaN(moment.getTime())) {
      return null;
    }
    var clock = pad(moment.getHours()) + ":" + pad(moment.getMinutes()) + ":" +
      pad(moment.getSeconds());
    var day = moment.getFullYear() + "-" + pad(moment.getMonth() + 1) + "-" +
      pad(moment.getDate());
    var today = new Date();
    var sameDay = moment.toDateString() === today.toDateString();
    return (sameDay ? "" : day + " ") + clock + " (your time)";
  }

  function localText(text) {
    return text.replace(STAMP, function (whole, date, time) {
      return localTime(date, time) || whole;
    });
  }

  // Every hub time in the rendered Markdown under `root` (the start page) and in the
  // Assignments tab's list of submissions, as local time.
  function localize(root) {
    var pages = root.querySelectorAll ?
      root.querySelectorAll(".jp-RenderedMarkdown, #submitted_assignments_list") : [];
    Array.prototype.forEach.call(pages, function (page) {
      var walker = document.createTreeWalker(page, NodeFilter.SHOW_TEXT);
      var node = walker.nextNode();
      while (node) {
        STAMP.lastIndex = 0;
        if (STAMP.test(node.nodeValue)) {
          node.nodeValue = localText(node.nodeValue);
        }
        node = walker.nextNode();
      }
    });
  }

  function statusUrl(app) {
    var settings = app.serviceManager.serverSettings;
    return settings.baseUrl.replace(/\/?$/, "/") + "coursekit/submissions";
  }

  // Beside each lesson's newest submission in the Assignments tab: its state, in local time.
  function showStates(app) {
    var list = document.getElementById("submitted_assignments_list");
    if (!list || !list.offsetParent) {
      return;
    }
    var settings = app.serviceManager.serverSettings;
    var headers = settings.token ? { Authorization: "token " + settings.token } : {};
    fetch(statusUrl(app), { credentials: "same-origin", headers: headers })
      .then(function (response) { return response.ok ? response.json() : []; })
      .then(function (rows) {
        (Array.isArray(rows) ? rows : []).forEach(function (row) {
          var lesson = String(row.lesson || "");
          var items = list.querySelectorAll(".list_item");
          Array.prototype.forEach.call(items, function (item) {
            var name = item.querySelector(".item_name");
            if (!lesson || !name || name.textContent.trim() !== lesson) {
              return;
            }
            var submissions = item.querySelectorAll(".nested_list_item");
            var newest = submissions.length ? submissions[submissions.length - 1] : item;
            var state = item.querySelector("." + STATE_CLASS);
            if (!state) {
              state = document.createElement("div");
              state.className = STATE_CLASS;
              state.setAttribute("role", "status");
              state.style.padding = "2px 8px";
              state.style.fontStyle = "italic";
            }
            if (state.parentNode !== newest) {
              newest.appendChild(state);
            }
            state.textContent = "Feedback on submit: " + localText(String(row.status || ""));
          });
        });
      })
      .catch(function (error) {
        console.warn("coursekit: the submissions' state was not shown", error);
      });
  }

  var states = {
    id: "coursekit-start-page:submissions",
    description: "Shows each submission's state in the Assignments tab, and the hub's times " +
      "in the reader's own time zone.",
    autoStart: true,
    activate: function (app) {
      localize(document.body);
      new MutationObserver(function (changes) {
        changes.forEach(function (change) {
          Array.prototype.forEach.call(change.addedNodes, function (node) {
            var inside = node.nodeType === 1 && node.closest &&
              node.closest(".jp-RenderedMarkdown, #submitted_assignments_list");
            if (node.nodeType === 1) {
              localize(inside ? inside.parentNode : node);
            }
          });
        });
      }).observe(document.body, { childList: true, subtree: true });
      window.setInterval(function () { showStates(app); }, 3000);
    }
  };

  var NOT_FETCHED_CLASS = "coursekit-not-fetched";

  // The notebook a rendered link opens (JupyterLab points it at files/<path>), when it is a
  // lesson's own (<lesson>/<lesson>.ipynb); else null.
  function lessonPath(anchor) {
    var url;
    try {
      url = new URL(anchor.href, window.location.href);
    } catch (error) {
      return null;
    }
    var at = url.pathname.indexOf("/files/");
    if (url.origin !== window.location.origin || at < 0) {
      return null;
    }
    var path = decodeURIComponent(url.pathname.slice(at + "/files/".length));
    var match = /(?:^|\/)((\d{2})_[A-Za-z0-9_]+)\/\1\.ipynb$/.exec(path);
    return match ? { path: path, number: match[2] } : null;
  }

  function sayNotFetched(app, anchor, lesson) {
    var message = "Lesson " + lesson.number + " is not in your home folder yet: fetch it " +
      "from the Assignments tab (Nbgrader ▸ Assignment List), then click this link again.";
    var note = anchor.parentNode && anchor.parentNode.querySelector("." + NOT_FETCHED_CLASS);
    if (!note) {
      note = document.createElement("span");
      note.className = NOT_FETCHED_CLASS;
      note.setAttribute("role", "alert");
      note.style.display = "block";
      note.style.fontWeight = "bold";
      anchor.parentNode.insertBefore(note, anchor.nextSibling);
    }
    note.textContent = message;
  }

  var nextLesson = {
    id: "coursekit-start-page:next-lesson",
    description: "Says so when a link leads to a lesson not fetched yet.",
    autoStart: true,
    activate: function (app) {
      document.addEventListener("click", function (event) {
        var anchor = event.target && event.target.closest &&
          event.target.closest(".jp-RenderedMarkdown a[href]");
        var lesson = anchor && lessonPath(anchor);
        if (!lesson) {
          return;
        }
        event.preventDefault();
        event.stopPropagation();
        app.serviceManager.contents.get(lesson.path, { content: false })
          .then(function () {
            return app.commands.execute("docmanager:open", { path: lesson.path });
          }, function () {
            sayNotFetched(app, anchor, lesson);
          });
      }, true);
    }
  };

  var container = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error("coursekit-start-page has no module " + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: [plugin, states, nextLesson] };
      });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB["coursekit-start-page"] = container;
})();
