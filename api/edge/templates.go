package edge

import (
	"html/template"
	"io/fs"
	"path"
	"strings"
)

// ParseWithLayout parses every *.html of files but layout.html, each with its own
// copy of layout.html and funcs, keyed by its name without .html: the shape of the
// hosted pages and of the console, whose page files define what the layout
// places. A template that does not parse panics: they are embedded, so that is a
// build defect, found by any test that starts the service.
func ParseWithLayout(files fs.FS, funcs template.FuncMap) map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "layout.html"))
	names, err := fs.Glob(files, "*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		out[strings.TrimSuffix(base, ".html")] = template.Must(template.Must(layout.Clone()).ParseFS(files, n))
	}
	return out
}
