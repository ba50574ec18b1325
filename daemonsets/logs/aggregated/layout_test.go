package aggregated

import "testing"

func TestLayoutMatchesRecordedPaths(t *testing.T) {
	conf := func(m map[string]string) Conf {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	c := conf(map[string]string{ConfRemoteDir: "file:///run/app-logs"})
	for _, tc := range []struct {
		f    Format
		app  string
		want string
	}{
		{FormatTFile, tfileApp, "file:///run/app-logs/root/bucket-logs-tfile/0005/" + tfileApp},
		{FormatIndexed, indexedApp, "file:///run/app-logs/root/bucket-logs-indexedformat/0001/" + indexedApp},
	} {
		got, err := LayoutFor(tc.f, c).AppDir("root", tc.app)
		if err != nil || got != tc.want {
			t.Errorf("%s: AppDir = %q, %v; want %q", tc.f, got, err, tc.want)
		}
	}
	if got, _ := LayoutFor(FormatTFile, conf(nil)).AppDir("u", "application_1_12345"); got != "/tmp/logs/u/bucket-logs-tfile/2345/application_1_12345" {
		t.Errorf("default AppDir = %q", got)
	}
	if NodeFile("localhost:8241") != nodeFile {
		t.Error("NodeFile")
	}
	f, err := WriteFormat(conf(map[string]string{ConfFileFormats: "IndexedFormat,TFile"}))
	if err != nil || f != FormatIndexed {
		t.Errorf("WriteFormat = %v, %v", f, err)
	}
}
