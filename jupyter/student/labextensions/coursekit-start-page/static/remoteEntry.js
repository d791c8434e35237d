// The course's start page stays current in JupyterLab (`make lab` loads this file with
// --LabApp.extra_labextensions_path=jupyter/student/labextensions).
//
// After a lesson is saved, the server rewrites START-HERE.md with the student's progress (the
// post-save hook coursekit.lab.after_save). JupyterLab does not reload a document that changed
// on disk, so an open start page would go on showing the old progress. This plugin reloads it
// from disk whenever its tab is shown, and at once when a file is saved while it is open.
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

  var container = {
    init: function () { return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error("coursekit-start-page has no module " + module));
      }
      return Promise.resolve(function () {
        return { __esModule: true, default: plugin };
      });
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB["coursekit-start-page"] = container;
})();
