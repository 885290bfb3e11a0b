// Command release writes the parts of a budgetguard release that are not
// images, byte for byte the same on every run for the same commit: every
// timestamp is --epoch, entries are written in a fixed order with fixed
// owners and modes, and gzip headers carry no name and no time.
//
//	release archive --epoch S --out FILE NAME=PATH...
//	    a .tar.gz or .zip (by FILE's extension) holding each PATH as NAME,
//	    executable when PATH is
//	release chart --epoch S --version V --out FILE [--dir DIR] CHART_DIR
//	    the chart packaged as `helm package --version V --app-version V`
//	    would (version without the leading v), loaded back with helm's loader
//	    to prove it; --dir also writes the versioned chart unpacked, as DIR/NAME
//	release krew --version V --url-prefix URL --out FILE TEMPLATE ARCHIVE...
//	    the krew manifest TEMPLATE with spec.version V and each platform's
//	    uri and sha256 taken from the archive named for its os and arch
//	release checksums --out FILE FILE...
//	    sha256sum's format, one line per file as named (sha256sum -c reads it)
//
// hack/release.sh (make release) runs it.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release archive|chart|krew|checksums ...")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "archive":
		err = archiveCmd(args)
	case "chart":
		err = chartCmd(args)
	case "krew":
		err = krewCmd(args)
	case "checksums":
		err = checksumsCmd(args)
	default:
		err = fmt.Errorf("unknown command %q: want archive, chart, krew or checksums", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
