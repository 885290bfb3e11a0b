// Command imagebuild packs budgetguard's static binaries into OCI image
// archives, without a container daemon and without pulling a base image: each
// image is one layer on an empty base (as the descheduler's FROM scratch),
// holding the binary and the passwd and group entries of the non-root user it
// runs as, with the org.opencontainers.image labels. One archive per
// component holds an OCI image layout (an index over linux/amd64 and
// linux/arm64) as a tar file, which `kind load image-archive`, `ctr images
// import` and `crane push --index` (after untarring) read.
//
// Every timestamp is --epoch and the tar entries are written in a fixed order
// with fixed owners and modes, so the same binaries give the same digests.
//
//	imagebuild --bin-dir DIR --out DIR --version V --revision R --source URL --epoch SECONDS --registry REPO_PREFIX NAME...
//
// reads DIR/linux_<arch>/NAME and writes OUT/NAME.oci.tar. make images runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	var opts options
	flag.StringVar(&opts.binDir, "bin-dir", "", "directory holding linux_<arch>/<name> for each platform")
	flag.StringVar(&opts.outDir, "out", "", "directory to write <name>.oci.tar to")
	flag.StringVar(&opts.version, "version", "", "budgetguard's version: the image tag and org.opencontainers.image.version")
	flag.StringVar(&opts.revision, "revision", "", "the git commit: org.opencontainers.image.revision")
	flag.StringVar(&opts.source, "source", "https://github.com/budgetguard/budgetguard", "org.opencontainers.image.source")
	flag.StringVar(&opts.registry, "registry", "ghcr.io/budgetguard", "repository prefix of the image names")
	flag.Int64Var(&opts.epoch, "epoch", 0, "seconds since 1970 for every timestamp (the commit's time)")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.Parse()
	opts.platforms = strings.Split(*platforms, ",")
	if opts.binDir == "" || opts.outDir == "" || opts.version == "" || opts.revision == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: imagebuild --bin-dir DIR --out DIR --version V --revision R [--epoch S] NAME...")
		os.Exit(2)
	}
	if err := os.MkdirAll(opts.outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
	for _, name := range flag.Args() {
		archive := filepath.Join(opts.outDir, name+".oci.tar")
		digest, err := buildArchive(opts, name, archive)
		if err != nil {
			fmt.Fprintf(os.Stderr, "imagebuild: %s: %v\n", name, err)
			os.Exit(1)
		}
		info, err := os.Stat(archive)
		if err != nil {
			fmt.Fprintln(os.Stderr, "imagebuild:", err)
			os.Exit(1)
		}
		fmt.Printf("%s\t%s\t%s:%s\t%d bytes\n", archive, digest, opts.imageName(name), opts.version, info.Size())
	}
}
