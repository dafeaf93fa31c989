// The smallest filesystem: `fuse-uring mount examples/hello.ts /mnt/hello`, then
// `cat /mnt/hello/hello.txt`.
export default { "hello.txt": "Hello, world!\n" };
