/*
 * Web workers for the docs site opened from disk (file://), with no network request.
 *
 * Material for MkDocs runs its search in a web worker. A page opened from file:// may not start one (Chromium:
 * "cannot be accessed from origin 'null'"), and the offline plugin's answer is a shim fetched from a CDN. This file
 * is dplens's own replacement, listed in mkdocs.yml under extra.polyfills (the name contains "iframe-worker", which
 * tells the offline plugin that a shim is present). Served over http(s) it does nothing.
 *
 * How: `new Worker(url)` then runs the worker's script in a hidden same-origin iframe. Inside, `postMessage` delivers
 * to the page and the page's `postMessage` dispatches a "message" event on the iframe's window, both asynchronously
 * as with a real worker; `importScripts` loads scripts in order and returns a promise (Material's worker awaits it).
 */
(function () {
  "use strict";
  if (location.protocol !== "file:" || typeof document === "undefined") {
    return;
  }

  function later(action) {
    setTimeout(action, 0);
  }

  class FileWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.onerror = null;
      this._inbox = [];
      this._ready = false;
      this._frame = document.createElement("iframe");
      this._frame.hidden = true;
      this._frame.setAttribute("aria-hidden", "true");
      (document.body || document.documentElement).appendChild(this._frame);

      const scope = this._frame.contentWindow;
      const scriptUrl = new URL(url, document.baseURI).href; // a worker resolves importScripts from its script
      const load = (src) =>
        new Promise((resolve, reject) => {
          const script = scope.document.createElement("script");
          script.src = new URL(src, scriptUrl).href;
          script.onload = () => resolve();
          script.onerror = () => reject(new Error(`could not load ${script.src}`));
          scope.document.head.appendChild(script);
        });
      scope.postMessage = (data) => later(() => this._emit(new MessageEvent("message", { data })));
      scope.importScripts = (...sources) => sources.reduce((done, src) => done.then(() => load(src)), Promise.resolve());

      load(scriptUrl).then(
        () => {
          this._ready = true;
          this._inbox.splice(0).forEach((data) => this._deliver(data));
        },
        (error) => this._emit(new ErrorEvent("error", { message: error.message, error })),
      );
    }

    postMessage(data) {
      if (this._ready) {
        this._deliver(data);
      } else {
        this._inbox.push(data);
      }
    }

    terminate() {
      this._frame.remove();
      this._ready = false;
      this._inbox = [];
    }

    _deliver(data) {
      const scope = this._frame.contentWindow;
      if (scope) {
        later(() => scope.dispatchEvent(new scope.MessageEvent("message", { data })));
      }
    }

    _emit(event) {
      this.dispatchEvent(event);
      const handler = event.type === "message" ? this.onmessage : this.onerror;
      if (typeof handler === "function") {
        handler.call(this, event);
      }
    }
  }

  window.Worker = FileWorker;
})();
