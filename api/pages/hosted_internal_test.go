package pages

import "testing"

// The script navigates to the redirect URL after success: only a plain web address
// may get there.
func TestPageRedirect(t *testing.T) {
	live, sandbox := New(Config{Environment: "live"}, Deps{}), New(Config{Environment: "sandbox"}, Deps{})
	for _, c := range []struct {
		p        *Pages
		raw      string
		want     string
		wantHost string
	}{
		{live, "https://shop.example/thanks?order=7", "https://shop.example/thanks?order=7", "shop.example"},
		{live, "http://shop.example/thanks", "", ""},
		{sandbox, "http://localhost:3000/done", "http://localhost:3000/done", "localhost"},
		{sandbox, "javascript:alert(1)", "", ""},
		{sandbox, "data:text/html,hi", "", ""},
		{sandbox, "//shop.example/x", "", ""},
		{sandbox, "/relative", "", ""},
		{sandbox, "https://user:pw@shop.example/", "", ""},
		{sandbox, "", "", ""},
	} {
		got := c.p.continueTo(c.raw)
		if got.RedirectURL != c.want || got.RedirectHost != c.wantHost {
			t.Errorf("%s continueTo(%q) = %q, %q; want %q, %q", c.p.cfg.Environment, c.raw, got.RedirectURL, got.RedirectHost,
				c.want, c.wantHost)
		}
	}
}
