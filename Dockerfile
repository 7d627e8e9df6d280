# A static kira binary on a distroless base, run as a non-root user.
#   docker build -t kira .
#   docker run --rm kira run --etcd https://etcd:2379 --cluster demo
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/kira ./cmd/kira

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kira /usr/local/bin/kira
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kira"]
